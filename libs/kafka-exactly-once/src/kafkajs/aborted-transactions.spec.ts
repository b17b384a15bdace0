import { dropAbortedRecords, FetchedPartition, FetchedRecord, filterAbortedTransactions, filtersAbortedTransactions } from './aborted-transactions';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const filterAbortedMessages = require('kafkajs/src/consumer/filterAbortedMessages');

const record = (offset: number, producerId: string, inTransaction = true): FetchedRecord => ({ offset: String(offset), key: null, isControlRecord: false, batchContext: { producerId, inTransaction } });
const marker = (offset: number, producerId: string, type: 'abort' | 'commit'): FetchedRecord => ({
  offset: String(offset),
  key: Buffer.from([0, 0, 0, type === 'abort' ? 0 : 1]),
  isControlRecord: true,
  batchContext: { producerId, inTransaction: true },
});

/** Producers A (7) and B (8) write one record each in a transaction; B aborts, then A; then a committed record of C (9). */
function overlapping(): FetchedPartition {
  return {
    // As the broker lists them: by abort marker (B's at 2 before A's at 3), not by first offset.
    abortedTransactions: [
      { producerId: '8', firstOffset: '1' },
      { producerId: '7', firstOffset: '0' },
    ],
    messages: [record(0, '7'), record(1, '8'), marker(2, '8', 'abort'), marker(3, '7', 'abort'), record(4, '9'), marker(5, '9', 'commit')],
  };
}

const delivered = (messages: FetchedRecord[]) => messages.filter((m) => !m.isControlRecord).map((m) => m.offset);

describe('the read-committed filter of aborted transactions', () => {
  it("KafkaJS 2.2.4's own filter delivers a record of an aborted transaction when two aborted transactions overlap", () => {
    const partition = overlapping();
    expect(delivered(filterAbortedMessages(partition))).toEqual(['0', '4']); // '0' is A's, aborted
  });

  it('drops every record of an aborted transaction, whatever order the broker lists them in', () => {
    const partition = overlapping();
    expect(dropAbortedRecords(partition)).toBe(2);
    expect(delivered(partition.messages)).toEqual(['4']);
    expect(partition.abortedTransactions).toEqual([]); // nothing left for KafkaJS's filter
    // The dropped records stay in the batch (as control records), so the fetch position moves past them.
    expect(partition.messages.map((m) => m.offset)).toEqual(['0', '1', '2', '3', '4', '5']);
  });

  it('drops records of transactions begun before the fetched range, and keeps a later transaction of the same producer', () => {
    const partition: FetchedPartition = {
      abortedTransactions: [
        { producerId: '5', firstOffset: '90' },
        { producerId: '6', firstOffset: '95' },
        { producerId: '5', firstOffset: '104' },
      ],
      // Fetched from 100: both aborted transactions began before it.
      messages: [record(100, '6'), record(101, '5'), marker(102, '5', 'abort'), marker(103, '6', 'abort'), record(104, '5'), marker(105, '5', 'abort'), record(106, '5'), record(107, '5', false), marker(108, '5', 'commit')],
    };
    dropAbortedRecords(partition);
    expect(delivered(partition.messages)).toEqual(['106', '107']);
  });

  it('changes nothing without aborted transactions', () => {
    const partition: FetchedPartition = { abortedTransactions: [], messages: [record(0, '1'), marker(1, '1', 'commit'), record(2, '2', false)] };
    expect(dropAbortedRecords(partition)).toBe(0);
    expect(delivered(partition.messages)).toEqual(['0', '2']);
  });

  it("filters what one broker's fetch answers, once however often it is applied, and leaves KafkaJS's Broker class as it is", async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const Broker = require('kafkajs/src/broker');
    const stockFetch = Broker.prototype.fetch;
    const broker = { fetch: jest.fn(async (_request: object) => ({ responses: [{ topicName: 't', partitions: [overlapping()] }] })) };
    filterAbortedTransactions(broker);
    const wrapped = broker.fetch;
    filterAbortedTransactions(broker);
    expect(broker.fetch).toBe(wrapped);
    expect(filtersAbortedTransactions(broker)).toBe(true);
    const answer = (await broker.fetch({})) as { responses: Array<{ partitions: FetchedPartition[] }> };
    expect(delivered(answer.responses[0].partitions[0].messages)).toEqual(['4']);
    expect(Broker.prototype.fetch).toBe(stockFetch);
    expect(filtersAbortedTransactions(Object.create(Broker.prototype))).toBe(false);
  });
});
