import type { PaymentStatus } from './ledger-entry.entity';

/** com.example.PaymentRequested (schemas/payment-requested.v1.avsc); longs decode to bigint. */
export interface PaymentRequested {
  paymentId: string;
  accountId: string;
  amountCents: bigint;
  requestedAt: string;
}

/** com.example.PaymentProcessed (schemas/payment-processed.v1.avsc). */
export interface PaymentProcessed {
  paymentId: string;
  accountId: string;
  amountCents: bigint;
  status: PaymentStatus;
  balanceAfterCents: bigint;
}
