export interface PublishOptions {
  /** Record key; required unless the topic declares a key function (module option `topics`). */
  key?: string;
  headers?: Record<string, string>;
  /** The event's message id (e.g. an HTTP Idempotency-Key); a UUIDv7 when omitted. */
  messageId?: string;
}

export interface PublishResult {
  messageId: string;
  /** `sent`: Kafka acknowledged it (acks all). `spooled`: on local disk (fsynced), the drainer will send it. */
  status: 'sent' | 'spooled';
  partition?: number;
  offset?: string;
}

export interface PublishAllItem extends PublishOptions {
  topic: string;
  event: unknown;
}

export interface PublisherStatus {
  breaker: 'closed' | 'open' | 'half-open' | 'isolated';
  spool: { records: number; bytes: number; oldestAgeMs: number };
  sent: number;
  spooled: number;
  drained: number;
  /** Spooled records Kafka refused for good, moved to the spool's quarantine file (this run and earlier ones). */
  quarantined: number;
  /** Why the last one was refused (Kafka error type and message). */
  lastQuarantineReason?: string;
}
