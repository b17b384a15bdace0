import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** A transaction that holds a group's offsets: as `kafka-transactions.sh find-hanging` lists it. */
export interface HoldingTransaction {
  transactionalId?: string;
  producerId: string;
  producerEpoch: number;
  /** Its first offset on the group's partition of __consumer_offsets. */
  startOffset: string;
  state?: string;
}

/** The holders as a sentence: their transactional ids (when a coordinator names them), producer ids and states. */
export function describeHolders(holders: HoldingTransaction[]): string {
  return holders.length
    ? holders.map((h) => `${h.transactionalId ? `transactional id ${h.transactionalId}` : 'an unnamed transaction'} (producer id ${h.producerId}, epoch ${h.producerEpoch}, since offset ${h.startOffset}${h.state ? `, ${h.state}` : ''})`).join('; ')
    : 'a transaction not found by DescribeProducers (look with find-hanging)';
}

/**
 * The group's committed offset of an input partition stayed pending past the transaction timeout: a transaction
 * that its coordinator no longer settles (a hanging transaction, after a broker was killed) holds it, and the
 * partition cannot start. The message names the transaction and the commands an operator runs; the partition
 * retries meanwhile, and health shows it stalled with this error.
 */
export class HangingTransactionError extends KafkaExactlyOnceError {
  readonly retriable = true;

  constructor(
    readonly groupId: string,
    readonly topic: string,
    readonly partition: number,
    /** The partition of __consumer_offsets that holds the group's offsets (its leader is the group coordinator). */
    readonly offsetsPartition: number,
    readonly holders: HoldingTransaction[],
    readonly waitedMs: number,
    brokers: string,
    /** What the library's own abort met, when it tried one (`abortHangingTransactions`). */
    abortFailure = '',
  ) {
    const named = describeHolders(holders);
    const abort = holders.length ? holders.map((h) => `kafka-transactions.sh --bootstrap-server ${brokers} abort --topic __consumer_offsets --partition ${offsetsPartition} --start-offset ${h.startOffset}`).join(' ; ') : `kafka-transactions.sh --bootstrap-server ${brokers} abort --topic __consumer_offsets --partition ${offsetsPartition} --start-offset <offset>`;
    super(
      `hanging transaction: the committed offset of group ${groupId} for ${topic}[${partition}] has been pending for ${Math.round(waitedMs / 1000)} s, past the transaction timeout, held on __consumer_offsets[${offsetsPartition}] by ${named}. ` +
        `If its producer is gone, abort it: ${abort} (list them with: kafka-transactions.sh --bootstrap-server ${brokers} find-hanging --topic __consumer_offsets --partition ${offsetsPartition}); docs/operations.md, "A hanging transaction".${abortFailure}`,
    );
  }
}
