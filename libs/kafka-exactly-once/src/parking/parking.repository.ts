import type { DatabaseSession } from '../database/database.port';
import type { HeaderPair } from '../engine/record-headers';
import type { RecordIdentity } from '../engine/record-identity';
import type { RecordedFailure } from '../inbox/inbox.repository';
import { PARKED_KEYS_TABLE, PARKED_RECORDS_TABLE } from '../kafka-exactly-once.constants';
import type { OrderingKeyId } from './ordering-key';

/** A record to park under its ordering key, with its original bytes. */
export interface ParkedRecordInput {
  topic: string;
  partition: number;
  offset: string;
  id: RecordIdentity;
  key: OrderingKeyId;
  recordKey: Buffer | null;
  value: Buffer | null;
  headers: HeaderPair[];
  timestamp: string;
  reason: string;
  error: RecordedFailure | null;
}

/** The consumer's side of parking. Every method runs on the unit of work's query runner (its transaction). */
export class ParkingRepository {
  /**
   * Which of these ordering keys are parked. Takes a share lock on each parked key's row, so that a release
   * finishing (it deletes the row under an exclusive lock) waits for this unit of work, or this unit waits for
   * the release: a record is never handled while earlier records of its key are still parked.
   */
  async parkedAmong(runner: DatabaseSession, group: string, topic: string, digests: string[]): Promise<Set<string>> {
    if (digests.length === 0) return new Set();
    const rows: Array<{ digest: string }> = await runner.query(
      `SELECT encode(key_digest, 'hex') AS digest FROM ${PARKED_KEYS_TABLE}
       WHERE consumer_group = $1 AND topic = $2 AND key_digest IN (SELECT decode(d, 'hex') FROM unnest($3::text[]) AS d)
       ORDER BY key_digest FOR SHARE`,
      [group, topic, [...new Set(digests)]],
    );
    return new Set(rows.map((r) => r.digest));
  }

  /** Parks the record's key (when it is not parked yet) at this record, and the record under it. */
  async parkKey(runner: DatabaseSession, group: string, record: ParkedRecordInput): Promise<void> {
    await runner.query(
      `INSERT INTO ${PARKED_KEYS_TABLE} (consumer_group, topic, key_digest, ordering_key, reason, error, partition, "offset", message_id)
       VALUES ($1, $2, decode($3, 'hex'), $4, $5, $6::jsonb, $7, $8, $9)
       ON CONFLICT (consumer_group, topic, key_digest) DO NOTHING`,
      [group, record.topic, record.key.digest, record.key.display, record.reason, JSON.stringify(record.error), record.partition, record.offset, record.id.displayId],
    );
    await this.parkRecord(runner, group, record);
  }

  /** Adds a record to its parked key's queue (after every record parked before it). */
  async parkRecord(runner: DatabaseSession, group: string, record: ParkedRecordInput): Promise<void> {
    await runner.query(
      `INSERT INTO ${PARKED_RECORDS_TABLE}
         (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, record_key, value, headers, record_timestamp, reason, error)
       VALUES ($1, $2, decode($3, 'hex'), $4, $5, $6, decode($7, 'hex'), $8, $9, $10, $11::jsonb, $12, $13, $14::jsonb)
       ON CONFLICT (consumer_group, topic, partition, "offset") DO NOTHING`,
      [
        group,
        record.topic,
        record.key.digest,
        record.partition,
        record.offset,
        record.id.scope,
        record.id.digest,
        record.id.displayId,
        record.recordKey,
        record.value,
        JSON.stringify(record.headers),
        record.timestamp,
        record.reason,
        JSON.stringify(record.error),
      ],
    );
  }
}
