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
