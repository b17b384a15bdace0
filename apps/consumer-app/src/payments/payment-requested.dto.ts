import { IsInt, IsString } from 'class-validator';
import type { PaymentRequested } from './payment.events';

/**
 * com.example.PaymentRequested as JSON (EVENT_FORMAT=json): the Avro record's fields and types, the `long`
 * amount an integer (the module's JSON reading refuses one beyond 2^53 before it gets here).
 */
export class PaymentRequestedDto {
  @IsString()
  paymentId!: string;

  @IsString()
  accountId!: string;

  @IsInt()
  amountCents!: number;

  @IsString()
  requestedAt!: string;
}

/** A payment as the ledger takes it, from either format: the amount as bigint (Avro's long already is one). */
export function paymentRequested(event: PaymentRequested | PaymentRequestedDto): PaymentRequested {
  return { paymentId: event.paymentId, accountId: event.accountId, amountCents: BigInt(event.amountCents), requestedAt: event.requestedAt };
}
