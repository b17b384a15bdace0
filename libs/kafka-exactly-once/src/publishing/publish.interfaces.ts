import type { EventHeaders } from './event-headers';

export interface PublishOptions {
  /** Record key; required unless the topic declares a key function (module option `topics`). */
  key?: string;
  /**
   * Headers of the record: a string value is sent as UTF-8, a Buffer or Uint8Array as is (byte for byte, also
   * after a spell in the spool); an undefined value leaves the header out. Any other value (a number, a boolean,
   * null) is refused with InvalidPublishOptionsError: convert it first, e.g. `String(attempt)`.
   */
  headers?: EventHeaders;
  /**
   * The event's message id, which consumers deduplicate by; a UUIDv7 when omitted. A non-empty string. One taken
   * from a client (an HTTP `Idempotency-Key`) must be scoped to that client, or two clients' keys collide and the
   * second event is dropped as a duplicate: see docs/publishing.md.
   */
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
