import { ClusterClient, ProtocolRequest, sendRequest } from '../producer/kafkajs-internals';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Decoder = require('kafkajs/src/protocol/decoder');

const WRITE_TXN_MARKERS = 27;
const DESCRIBE_PRODUCERS = 61;
const LIST_TRANSACTIONS = 66;

/** A transaction open on a partition: its producer, since which offset, and its transactional id when known. */
export interface OpenTransaction {
  producerId: string;
  producerEpoch: number;
  startOffset: string;
  transactionalId?: string;
  state?: string;
  /** The epoch of the coordinator that last wrote a marker for this producer here (-1: none yet). */
  coordinatorEpoch?: number;
}

/** The open transactions of one partition, as DescribeProducers answers. */
export interface PartitionProducers {
  topic: string;
  partition: number;
  errorCode: number;
  producers: OpenTransaction[];
}

/**
 * Coordinator states in which the coordinator itself still ends the transaction (ListTransactions' names): any
 * other (Empty, CompleteCommit, CompleteAbort, Dead) with a transaction of that producer open on a partition means
 * nothing will ever write its marker.
 */
const SETTLED_BY_COORDINATOR = new Set(['Ongoing', 'PrepareCommit', 'PrepareAbort', 'PrepareEpochFence']);

/** Whether a transaction's coordinator no longer ends it (named, in a state that writes no more markers). */
export function forgottenByCoordinator(open: OpenTransaction): boolean {
  return open.transactionalId !== undefined && open.state !== undefined && !SETTLED_BY_COORDINATOR.has(open.state);
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

/** DescribeProducers v0 (KIP-664, flexible): the producers of partitions (all led by one broker) with their open transactions. */
export function describeProducersV0(topics: Array<{ topic: string; partitions: number[] }>): ProtocolRequest {
  return {
    request: {
      apiKey: DESCRIBE_PRODUCERS,
      apiVersion: 0,
      apiName: 'DescribeProducers',
      // KafkaJS writes request header v1: the empty tagged fields of header v2 open the body.
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarInt(topics.length + 1);
        for (const { topic, partitions } of topics) {
          encoder.writeUVarIntString(topic).writeUVarInt(partitions.length + 1);
          for (const p of partitions) encoder.writeInt32(p);
          encoder.writeUVarInt(0);
        }
        return encoder.writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields(); // response header v1
        decoder.readInt32(); // throttle time
        const topics = decoder.readUVarIntArray((t: any) => {
          const topic = t.readUVarIntString();
          const partitions = t.readUVarIntArray((p: any) => {
            const partition = p.readInt32();
            const errorCode = p.readInt16();
            p.readUVarIntString(); // error message
            const producers: OpenTransaction[] = (
              p.readUVarIntArray((s: any) => {
                const producerId = s.readInt64().toString();
                const producerEpoch = s.readInt32();
                s.readInt32(); // last sequence
                s.readInt64(); // last timestamp
                const coordinatorEpoch = s.readInt32();
                const startOffset = s.readInt64().toString();
                s.readTaggedFields();
                return { producerId, producerEpoch, startOffset, coordinatorEpoch };
              }) ?? []
            ).filter((s: OpenTransaction) => BigInt(s.startOffset) >= 0n);
            p.readTaggedFields();
            return { topic, partition, errorCode, producers };
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

/** One partition's answer to WriteTxnMarkers. */
export interface MarkerAnswer {
  topic: string;
  partition: number;
  errorCode: number;
}

/**
 * WriteTxnMarkers v1 (flexible): an abort marker for one producer's transaction on partitions led by the broker it
 * is sent to, what `kafka-transactions.sh abort` sends (KIP-664; the ClusterAction permission on the cluster).
 */
export function abortMarkersV1(producerId: string, producerEpoch: number, coordinatorEpoch: number, topics: Array<{ topic: string; partitions: number[] }>): ProtocolRequest {
  return {
    request: {
      apiKey: WRITE_TXN_MARKERS,
      apiVersion: 1,
      apiName: 'WriteTxnMarkers',
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarInt(2); // header's tagged fields; one marker
        encoder.writeInt64(producerId).writeInt16(producerEpoch).writeBoolean(false).writeUVarInt(topics.length + 1);
        for (const { topic, partitions } of topics) {
          encoder.writeUVarIntString(topic).writeUVarInt(partitions.length + 1);
          for (const p of partitions) encoder.writeInt32(p);
          encoder.writeUVarInt(0);
        }
        return encoder.writeInt32(coordinatorEpoch).writeUVarInt(0).writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields(); // response header v1
        const markers =
          decoder.readUVarIntArray((m: any) => {
            m.readInt64(); // producer id
            const topics =
              m.readUVarIntArray((t: any) => {
                const topic = t.readUVarIntString();
                const partitions =
                  t.readUVarIntArray((p: any) => {
                    const partition = p.readInt32();
                    const errorCode = p.readInt16();
                    p.readTaggedFields();
                    return { topic, partition, errorCode };
                  }) ?? [];
                t.readTaggedFields();
                return partitions;
              }) ?? [];
            m.readTaggedFields();
            return topics.flat();
          }) ?? [];
        return markers.flat();
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
    const described = await sendRequest<PartitionProducers[]>(coordinator, describeProducersV0([{ topic: '__consumer_offsets', partitions: [offsetsPartition] }]));
    return { offsetsPartition, open: await this.named(described.flatMap((p) => p.producers)) };
  }

  /** The transactions open on a partition (DescribeProducers on its leader), named by their coordinators. */
  async openOn(topic: string, partition: number): Promise<OpenTransaction[]> {
    await this.connected();
    await this.cluster.addMultipleTargetTopics([topic]);
    const leader = this.cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)?.leader;
    if (leader === undefined || leader < 0) return [];
    const broker = await this.cluster.findBroker({ nodeId: leader });
    const described = await sendRequest<PartitionProducers[]>(broker, describeProducersV0([{ topic, partitions: [partition] }]));
    return this.named(described.flatMap((p) => p.producers));
  }

  /**
   * Aborts one producer's transaction (that producer id and epoch) on every partition where it is open: the
   * partitions of the cluster's topics (not the internal ones) and `also` (the __consumer_offsets partition known
   * to hold it), asked with DescribeProducers leader by leader, then an abort marker (WriteTxnMarkers) from each
   * leader. What an operator does with `kafka-transactions.sh abort`, partition by partition. Returns the
   * partitions aborted; throws when a leader refuses (ClusterAction not granted, say), naming what was done.
   */
  async abortEverywhere(holder: OpenTransaction, also: { topic: string; partition: number }): Promise<string[]> {
    await this.connected();
    const anyBroker = await this.cluster.findBroker({ nodeId: this.cluster.getNodeIds()[0] });
    const { topicMetadata } = await anyBroker.metadata([]);
    const byLeader = new Map<number, Map<string, number[]>>();
    const add = (leader: number, topic: string, partition: number) => {
      if (leader < 0) return;
      const topics = byLeader.get(leader) ?? byLeader.set(leader, new Map()).get(leader)!;
      const partitions = topics.get(topic) ?? topics.set(topic, []).get(topic)!;
      if (!partitions.includes(partition)) partitions.push(partition);
    };
    for (const t of topicMetadata) {
      if (t.isInternal || t.topic.startsWith('__')) continue;
      for (const p of t.partitionMetadata) add(p.leader, t.topic, p.partitionId);
    }
    const offsetsLeader = topicMetadata.find((t) => t.topic === also.topic)?.partitionMetadata.find((p) => p.partitionId === also.partition)?.leader;
    if (offsetsLeader === undefined) {
      await this.cluster.addMultipleTargetTopics([also.topic]);
      add(this.cluster.findTopicPartitionMetadata(also.topic).find((p) => p.partitionId === also.partition)?.leader ?? -1, also.topic, also.partition);
    } else add(offsetsLeader, also.topic, also.partition);

    const aborted: string[] = [];
    const refused: string[] = [];
    for (const [leader, topics] of byLeader) {
      const broker = await this.cluster.findBroker({ nodeId: leader });
      const request = [...topics].map(([topic, partitions]) => ({ topic, partitions }));
      const described = await sendRequest<PartitionProducers[]>(broker, describeProducersV0(request));
      const open = described.flatMap((p) => p.producers.filter((t) => t.producerId === holder.producerId && t.producerEpoch === holder.producerEpoch).map((t) => ({ ...p, coordinatorEpoch: t.coordinatorEpoch ?? -1 })));
      // One request per coordinator epoch (a marker carries one; usually they are all the same).
      for (const epoch of new Set(open.map((o) => o.coordinatorEpoch))) {
        const these = open.filter((o) => o.coordinatorEpoch === epoch);
        const grouped = new Map<string, number[]>();
        for (const o of these) grouped.set(o.topic, [...(grouped.get(o.topic) ?? []), o.partition]);
        const answers = await sendRequest<MarkerAnswer[]>(broker, abortMarkersV1(holder.producerId, holder.producerEpoch, Math.max(epoch, 0), [...grouped].map(([topic, partitions]) => ({ topic, partitions }))));
        for (const a of answers) (a.errorCode === 0 ? aborted : refused).push(a.errorCode === 0 ? `${a.topic}[${a.partition}]` : `${a.topic}[${a.partition}] (error code ${a.errorCode})`);
      }
    }
    if (refused.length) throw new Error(`the abort marker was refused on ${refused.join(', ')}${aborted.length ? `; written on ${aborted.join(', ')}` : ''}`);
    return aborted;
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
