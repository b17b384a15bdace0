import { z } from 'zod';
import type { PaymentRequested } from './payment.events';

/**
 * com.example.PaymentRequested as JSON (EVENT_FORMAT=json), as a Standard Schema (zod): the Avro record's fields
 * and types, the `long` amount an integer (the module's JSON reading refuses one beyond 2^53 before it gets here).
 * The payments are the demo's busy topic: zod validates one in a fraction of a microsecond (the other topics show
 * class-validator DTOs, which cost a few microseconds an event: docs/benchmarks.md).
 */
export const PaymentRequestedJson = z.object({
  paymentId: z.string(),
  accountId: z.string(),
  amountCents: z.number().int(),
  requestedAt: z.string(),
});

export type PaymentRequestedDto = z.output<typeof PaymentRequestedJson>;

/** A payment as the ledger takes it, from either format: the amount as bigint (Avro's long already is one). */
export function paymentRequested(event: PaymentRequested | PaymentRequestedDto): PaymentRequested {
  return { paymentId: event.paymentId, accountId: event.accountId, amountCents: BigInt(event.amountCents), requestedAt: event.requestedAt };
}
