import { OperatorRequestError } from '../errors/operator-request.error';
import { requireText } from './operator-store';

/** The largest producer id (an int64). */
const MAX_PRODUCER_ID = 2n ** 63n - 1n;

/**
 * The transaction an abort names, from a request's body (`POST /kafka-eo/transactions/abort`) or the CLI's
 * arguments: a topic, a partition (0 to 2^31 - 1), a producer id (0 to 2^63 - 1, as text or a number) and the offset
 * its transaction starts at there, as listed.
 */
export function transactionTarget(body: Record<string, unknown>): { topic: string; partition: number; producerId: string; startOffset: string } {
  const topic = requireText(body.topic, 'topic', 249);
  const partition = typeof body.partition === 'string' && /^[0-9]{1,10}$/.test(body.partition) ? Number(body.partition) : body.partition;
  if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0 || partition > 2147483647) {
    throw new OperatorRequestError('invalid', 'partition is required: a whole number from 0 to 2147483647', 'partition');
  }
  const id = typeof body.producerId === 'number' && Number.isSafeInteger(body.producerId) ? String(body.producerId) : body.producerId;
  if (typeof id !== 'string' || !/^[0-9]{1,19}$/.test(id) || BigInt(id) > MAX_PRODUCER_ID) {
    throw new OperatorRequestError('invalid', 'producerId is required: the producer id as listed (a whole number, as text)', 'producerId');
  }
  // The transaction as it was read: one that started again since (the same producer, a new transaction) is not it.
  const start = typeof body.startOffset === 'number' && Number.isSafeInteger(body.startOffset) ? String(body.startOffset) : body.startOffset;
  if (typeof start !== 'string' || !/^[0-9]{1,19}$/.test(start) || BigInt(start) > MAX_PRODUCER_ID) {
    throw new OperatorRequestError('invalid', "startOffset is required: the offset the transaction starts at on the partition, as listed (a whole number, as text)", 'startOffset');
  }
  return { topic, partition, producerId: String(BigInt(id)), startOffset: String(BigInt(start)) };
}
