import { ClusterClient, ProtocolRequest, sendRequest } from '../producer/kafkajs-internals';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Decoder = require('kafkajs/src/protocol/decoder');

const DESCRIBE_PRODUCERS = 61;
const LIST_TRANSACTIONS = 66;

/** A transaction open on a partition: its producer, since which offset, and its transactional id when known. */
export interface OpenTransaction {
  producerId: string;
  producerEpoch: number;
  startOffset: string;
  transactionalId?: string;
  state?: string;
}

/** Java's String.hashCode, by which Kafka places a group on a partition of __consumer_offsets. */
export function javaHash(text: string): number {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (Math.imul(31, h) + text.charCodeAt(i)) | 0; // UTF-16 code units, as Java's
  return h;
}

/** The partition of __consumer_offsets that holds a group's offsets (its coordinator leads it). */
export function offsetsPartitionOf(groupId: string, partitions: number): number {
  const hash = javaHash(groupId);
  return (hash === -2147483648 ? 0 : Math.abs(hash)) % partitions;
}

/** DescribeProducers v0 (KIP-664, flexible): the producers of one partition with their open transactions. */
export function describeProducersV0(topic: string, partition: number): ProtocolRequest {
  return {
    request: {
      apiKey: DESCRIBE_PRODUCERS,
      apiVersion: 0,
      apiName: 'DescribeProducers',
      // KafkaJS writes request header v1: the empty tagged fields of header v2 open the body.
      encode: async () => new Encoder().writeUVarInt(0).writeUVarInt(2).writeUVarIntString(topic).writeUVarInt(2).writeInt32(partition).writeUVarInt(0).writeUVarInt(0),
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields(); // response header v1
        decoder.readInt32(); // throttle time
        const topics = decoder.readUVarIntArray((t: any) => {
          t.readUVarIntString();
          const partitions = t.readUVarIntArray((p: any) => {
            p.readInt32(); // partition index
            const errorCode = p.readInt16();
            p.readUVarIntString(); // error message
            const producers: OpenTransaction[] = (
              p.readUVarIntArray((s: any) => {
                const producerId = s.readInt64().toString();
                const producerEpoch = s.readInt32();
                s.readInt32(); // last sequence
                s.readInt64(); // last timestamp
                s.readInt32(); // coordinator epoch
                const startOffset = s.readInt64().toString();
                s.readTaggedFields();
                return { producerId, producerEpoch, startOffset };
              }) ?? []
            ).filter((s: OpenTransaction) => BigInt(s.startOffset) >= 0n);
            p.readTaggedFields();
            return { errorCode, producers };
          });
          t.readTaggedFields();
          return partitions ?? [];
        });
        return (topics ?? []).flat();
      },
      parse: async (data: unknown) => data,
    },
  };
}

/** ListTransactions v0 (KIP-664, flexible), filtered by producer ids: their transactional ids and states. */
export function listTransactionsV0(producerIds: string[]): ProtocolRequest {
  return {
    request: {
      apiKey: LIST_TRANSACTIONS,
      apiVersion: 0,
      apiName: 'ListTransactions',
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarInt(1).writeUVarInt(producerIds.length + 1);
        for (const id of producerIds) encoder.writeInt64(id);
        return encoder.writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields();
        decoder.readInt32(); // throttle time
        decoder.readInt16(); // error code
        decoder.readUVarIntArray((d: any) => d.readUVarIntString()); // unknown state filters
        const states =
          decoder.readUVarIntArray((d: any) => {
            const transactionalId = d.readUVarIntString();
            const producerId = d.readInt64().toString();
            const state = d.readUVarIntString();
            d.readTaggedFields();
            return { transactionalId, producerId, state };
          }) ?? [];
        return states;
      },
      parse: async (data: unknown) => data,
    },
  };
}

/**
 * Who holds a group's committed offsets unstable: the transactions open on the group's partition of
 * __consumer_offsets (DescribeProducers on its leader, the group coordinator) and their transactional ids
 * (ListTransactions on every broker: each knows the transactions it coordinates). What `kafka-transactions.sh
 * find-hanging` does, for the log and health of a partition whose offsets stay pending past the transaction timeout.
 */
export class HangingTransactions extends ClusterClient {
  async holdingOffsetsOf(groupId: string): Promise<{ offsetsPartition: number; open: OpenTransaction[] }> {
    await this.connected();
    await this.cluster.addMultipleTargetTopics(['__consumer_offsets']);
    const partitions = this.cluster.findTopicPartitionMetadata('__consumer_offsets').length || 50;
    const offsetsPartition = offsetsPartitionOf(groupId, partitions);
    const coordinator = await this.cluster.findGroupCoordinator({ groupId });
    const described = await sendRequest<Array<{ errorCode: number; producers: OpenTransaction[] }>>(coordinator, describeProducersV0('__consumer_offsets', offsetsPartition));
    return { offsetsPartition, open: await this.named(described.flatMap((p) => p.producers)) };
  }

  /** The transactions open on a partition (DescribeProducers on its leader), named by their coordinators. */
  async openOn(topic: string, partition: number): Promise<OpenTransaction[]> {
    await this.connected();
    await this.cluster.addMultipleTargetTopics([topic]);
    const leader = this.cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)?.leader;
    if (leader === undefined || leader < 0) return [];
    const broker = await this.cluster.findBroker({ nodeId: leader });
    const described = await sendRequest<Array<{ errorCode: number; producers: OpenTransaction[] }>>(broker, describeProducersV0(topic, partition));
    return this.named(described.flatMap((p) => p.producers));
  }

  /** Each open transaction with its transactional id and state, from ListTransactions on every broker. */
  private async named(open: OpenTransaction[]): Promise<OpenTransaction[]> {
    if (open.length === 0) return open;
    const ids = open.map((t) => t.producerId);
    for (const nodeId of this.cluster.getNodeIds()) {
      try {
        const broker = await this.cluster.findBroker({ nodeId });
        const states = await sendRequest<Array<{ transactionalId: string; producerId: string; state: string }>>(broker, listTransactionsV0(ids));
        for (const s of states) {
          const t = open.find((o) => o.producerId === s.producerId);
          if (t) Object.assign(t, { transactionalId: s.transactionalId, state: s.state });
        }
      } catch {
        // A broker that does not answer: its transactions stay unnamed (the producer id is still told).
      }
    }
    return open;
  }
}
