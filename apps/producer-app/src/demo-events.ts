/** The demo's topics and events (docs/demo.md), as this app publishes them. */
export const TOPICS = {
  usersSignedUp: 'users.signed-up',
  paymentsRequested: 'payments.requested',
} as const;

/** com.example.UserSignedUp; key `user-<userId>`. */
export interface UserSignedUp {
  userId: number;
  userEmail: string;
  timestamp: string;
}

/** com.example.PaymentRequested; key = accountId. Positive amount = deposit, negative = withdrawal. */
export interface PaymentRequested {
  paymentId: string;
  accountId: string;
  amountCents: bigint | number;
  requestedAt: string;
}

/**
 * A payment as its topic is written: Avro takes the amount as it is (a `long`); JSON as an integer, exact only up
 * to 2^53 (what JSON readers parse without rounding), so a larger one is refused instead of being rounded.
 */
export function paymentForWire(event: PaymentRequested, format: 'avro' | 'json'): PaymentRequested {
  if (format === 'avro' || typeof event.amountCents !== 'bigint') return event;
  const amount = event.amountCents;
  if (amount > BigInt(Number.MAX_SAFE_INTEGER) || amount < BigInt(Number.MIN_SAFE_INTEGER)) throw new RangeError(`amountCents ${amount} is beyond JSON's exact integers (2^53)`);
  return { ...event, amountCents: Number(amount) };
}
