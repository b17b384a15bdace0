import { type Isolation, LATEST, type LogRecord, type LogRequests, type MarkerAnswer, type PartitionLeader, partitionLeaders, type PartitionOffset, type PartitionProducers, type TopicPartitions, type TransactionDescription, type TransactionListing, type TransactionMarker } from '../client/log-requests';
import { loggedRecords } from './fetched-records';
import { type connectionOptions, platformaticKafka, type PlatformaticKafka } from './load';
import { kafkaError, PlatformaticProducerCluster, protocolError } from './producer-parts';

type Connection = PlatformaticKafka.Connection;

/** Coordinator type of a consumer group in FindCoordinator. */
const GROUP = 0;
const ISOLATION = { committed: 1, uncommitted: 0 } as const;
const WRITE_TXN_MARKERS = 27;

/**
 * The library's own requests (client/log-requests.ts) on @platformatic/kafka: the connections and metadata of a
 * cluster as the producers' (producer-parts.ts), the client's protocol functions for DescribeProducers v0,
 * ListTransactions v0, ListOffsets v5 and Fetch v12 (each a version Kafka 3.9 and 4.x answer), and the library's
 * own codec for WriteTxnMarkers v1, which the client lacks.
 */
export class PlatformaticLogRequests implements LogRequests {
  private readonly cluster: PlatformaticProducerCluster;

  constructor(options: ReturnType<typeof connectionOptions>) {
    this.cluster = new PlatformaticProducerCluster(options, { stopped: () => false });
  }

  async partitionsOf(topic: string, refresh = false): Promise<PartitionLeader[]> {
    await this.connected();
    return partitionLeaders(this.cluster, topic, refresh);
  }

  async brokers(): Promise<number[]> {
    await this.connected();
    return this.cluster.nodeIds();
  }

  async groupCoordinator(groupId: string): Promise<number> {
    await this.connected();
    // Asked anew each time (as KafkaJS's cluster does): a coordinator that moved is not asked DescribeProducers.
    this.cluster.forgetCoordinator(GROUP, groupId);
    return (await this.cluster.coordinator(GROUP, groupId)).nodeId;
  }

  async describeProducers(broker: number, topics: TopicPartitions[]): Promise<PartitionProducers[]> {
    const { describeProducersV0 } = platformaticKafka();
    const answer = await answered(describeProducersV0.api.async(await this.connection(broker), topics.map((t) => ({ name: t.topic, partitionIndexes: t.partitions }))));
    return answer.topics.flatMap((t) =>
      t.partitions.map((p) => ({
        topic: t.name,
        partition: p.partitionIndex,
        errorCode: p.errorCode,
        // Producers with an open transaction only (current_txn_start_offset -1: none).
        producers: p.activeProducers
          .filter((a) => a.currentTxnStartOffset >= 0n)
          .map((a) => ({ producerId: String(a.producerId), producerEpoch: a.producerEpoch, startOffset: String(a.currentTxnStartOffset), coordinatorEpoch: a.coordinatorEpoch, lastTimestamp: String(a.lastTimestamp) })),
      })),
    );
  }

  async listTransactions(broker: number, producerIds: string[]): Promise<TransactionListing[]> {
    const { listTransactionsV0 } = platformaticKafka();
    const answer = await answered(listTransactionsV0.api.async(await this.connection(broker), [], producerIds.map(BigInt), -1n, null));
    return answer.transactionStates.map((s) => ({ transactionalId: s.transactionalId, producerId: String(s.producerId), state: s.transactionState }));
  }

  async writeTxnMarkers(broker: number, marker: TransactionMarker, topics: TopicPartitions[]): Promise<MarkerAnswer[]> {
    const connection = await this.connection(broker);
    return new Promise<MarkerAnswer[]>((resolve, reject) =>
      connection.send(WRITE_TXN_MARKERS, 1, () => writeTxnMarkersV1(marker, topics), readTxnMarkersV1 as never, true, true, (err: unknown, answer: unknown) =>
        err ? reject(kafkaError(err)) : resolve(answer as MarkerAnswer[]),
      ),
    );
  }

  async listOffset(broker: number, topic: string, partition: number, timestamp: number, isolation: Isolation): Promise<bigint> {
    const { listOffsetsV5 } = platformaticKafka();
    const connection = await this.connection(broker);
    try {
      const answer = await listOffsetsV5.api.async(connection, -1, ISOLATION[isolation], [{ name: topic, partitions: [{ partitionIndex: partition, currentLeaderEpoch: -1, timestamp: BigInt(timestamp) }] }]);
      return answer.topics[0].partitions[0].offset;
    } catch (err) {
      throw kafkaError(err);
    }
  }

  async latestOffsets(broker: number, topics: TopicPartitions[], isolation: Isolation): Promise<PartitionOffset[]> {
    const { listOffsetsV5 } = platformaticKafka();
    const connection = await this.connection(broker);
    const answer = await answered(
      listOffsetsV5.api.async(connection, -1, ISOLATION[isolation], topics.map((t) => ({ name: t.topic, partitions: t.partitions.map((partitionIndex) => ({ partitionIndex, currentLeaderEpoch: -1, timestamp: BigInt(LATEST) })) }))),
    );
    return answer.topics.flatMap((t) => t.partitions.map((p) => ({ topic: t.name, partition: p.partitionIndex, errorCode: p.errorCode, offset: p.offset })));
  }

  async describeTransactions(broker: number, transactionalIds: string[]): Promise<TransactionDescription[]> {
    const { describeTransactionsV0 } = platformaticKafka();
    const answer = await answered(describeTransactionsV0.api.async(await this.connection(broker), transactionalIds));
    return answer.transactionStates.map((s) => ({
      transactionalId: s.transactionalId,
      errorCode: s.errorCode,
      state: s.transactionState,
      timeoutMs: s.transactionTimeoutMs,
      startTimeMs: String(s.transactionStartTimeMs),
      producerId: String(s.producerId),
      producerEpoch: s.producerEpoch,
    }));
  }

  async fetch(broker: number, topic: string, partition: number, from: bigint, isolation: Isolation, maxBytes: number): Promise<{ errorCode: number; records: LogRecord[] }> {
    const { fetchV12 } = platformaticKafka();
    const connection = await this.connection(broker);
    // A full fetch outside any fetch session (session id 0, epoch -1); Fetch v12 names topics (topic ids came in v13).
    const answer = await answered(
      fetchV12.api.async(connection, 100, 1, maxBytes, ISOLATION[isolation], 0, -1, [{ topicId: topic, partitions: [{ partition, currentLeaderEpoch: -1, fetchOffset: from, lastFetchedEpoch: -1, partitionMaxBytes: maxBytes }] }], [], ''),
    );
    // An error of the whole request (a fetch session's, say) is a failed read, not an empty one.
    if (answer.errorCode) throw protocolError(answer.errorCode);
    const got = answer.responses[0]?.partitions[0];
    return { errorCode: got?.errorCode ?? 0, records: got ? loggedRecords(got) : [] };
  }

  reset(): void {
    // The pool drops a closed connection by itself; coordinators and leaders may have moved.
    this.cluster.forgetCoordinators();
  }

  async disconnect(): Promise<void> {
    await this.cluster.disconnect();
  }

  private connected(): Promise<void> {
    return this.cluster.connectOnce();
  }

  private async connection(nodeId: number): Promise<Connection> {
    await this.connected();
    return this.cluster.connectionTo(await this.cluster.findBroker({ nodeId }));
  }
}

/** An answer whose partitions may carry error codes (the client rejects it, the answer attached): the answer, codes included. */
async function answered<T>(request: Promise<T>): Promise<T> {
  try {
    return await request;
  } catch (err) {
    const carried = (err as { response?: T }).response;
    if (carried) return carried;
    throw kafkaError(err);
  }
}

/**
 * WriteTxnMarkers v1 (flexible): one marker, a commit or abort of one producer's transaction on partitions the
 * broker leads; what `kafka-transactions.sh abort` sends (KIP-664; the ClusterAction permission on the cluster).
 */
export function writeTxnMarkersV1(marker: TransactionMarker, topics: TopicPartitions[]): PlatformaticKafka.Writer {
  const { Writer } = platformaticKafka();
  return Writer.create()
    .appendArray([marker], (w, m) => {
      w.appendInt64(BigInt(m.producerId))
        .appendInt16(m.producerEpoch)
        .appendBoolean(m.commit)
        .appendArray(topics, (t, { topic, partitions }) => {
          t.appendString(topic).appendArray(partitions, (p, partition) => p.appendInt32(partition), true, false);
        })
        .appendInt32(m.coordinatorEpoch);
    })
    .appendTaggedFields();
}

/** WriteTxnMarkers v1's answer, partition by partition, errors included. */
export function readTxnMarkersV1(_correlationId: number, _apiKey: number, _apiVersion: number, reader: PlatformaticKafka.Reader): MarkerAnswer[] {
  const markers = reader.readArray((m) => {
    m.readInt64(); // producer id
    return m.readArray((t) => {
      const topic = t.readString();
      return t.readArray((p) => ({ topic, partition: p.readInt32(), errorCode: p.readInt16() }));
    }).flat();
  });
  reader.readTaggedFields();
  return markers.flat();
}
