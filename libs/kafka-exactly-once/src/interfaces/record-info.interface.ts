/** Where the record being handled came from. */
export interface RecordInfo {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  headers: Record<string, string>;
  /**
   * The `message-id` header (a `sha256:` form when it is not short plain text), or `topic/partition/offset` when
   * the record has none. On a retry tier, `topic`, `partition` and `offset` are the tier's, `messageId` the
   * original's. For calls outside the database, use `EventContext.idempotencyKey`, not this.
   */
  messageId: string;
  /** Record timestamp, ms since the epoch, as a string (KafkaJS). */
  timestamp: string;
  /**
   * The writer schema of a value in a Schema Registry's framing, once it is decoded: its registry id, its kind,
   * and the name of what was written (the Protobuf message's full name, the Avro record's full name; a JSON
   * Schema has none). A handler of a topic that carries several Protobuf messages tells them apart by `name`,
   * never by which fields are set (proto3 reads an absent field as its default). Undefined for other values (plain
   * JSON, Avro single-object encoding).
   *
   * @example
   * if (ctx.message.schema?.name === 'shop.OrderCancelled') return this.cancel(event as OrderCancelled, ctx);
   */
  schema?: RecordSchema;
}

/** What a `messageIdFrom` function is given besides the decoded event: the record, without an id of its own. */
export type KeyedRecord = Omit<RecordInfo, 'messageId' | 'schema'> & {
  /**
   * The record's key as it was written, byte for byte (null without one). `key` is its UTF-8 text, which a key that
   * is not UTF-8 loses bytes of (two such keys may read alike): key events by the record's key with
   * `(event, record) => record.keyBytes`.
   */
  keyBytes: Buffer | null;
};

/**
 * Where a record without a `message-id` header takes its identity from: the dotted path of a field of the decoded
 * event (`'paymentId'`, `'order.id'`: own fields only), or a function of the decoded event (before `validate`) and
 * the record. The key must be a non-empty string, a finite number, a bigint (a number and its decimal text are the
 * same key) or bytes (a Buffer or Uint8Array: its bytes, as `record.keyBytes` gives the record's key); of any length
 * (it is hashed). Give the same key for every delivery of one event: a function must not use the record's partition
 * or offset.
 */
export type MessageIdFrom = string | ((event: any, record: KeyedRecord) => unknown);

/** The registry's writer schema of a record's value (`RecordInfo.schema`). */
export interface RecordSchema {
  /** The schema id in the value's framing. */
  id: number;
  /** `avro`, `json` (JSON Schema) or `protobuf`. */
  type: 'avro' | 'json' | 'protobuf';
  /** The Protobuf message's or the Avro record's full name (with its package or namespace); undefined for JSON Schema. */
  name?: string;
}
