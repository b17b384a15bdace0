import { type Isolation, LATEST, type LogRecord, type LogRequests, type MarkerAnswer, type OpenTransaction, type PartitionLeader, partitionLeaders, type PartitionOffset, type PartitionProducers, type TopicPartitions, type TransactionDescription, type TransactionListing, type TransactionMarker } from '../client/log-requests';
import { driverPartsOf } from '../client/driver-parts';
import type { KafkaClient } from './client';
import { ClusterClient, type KafkaJsBroker, ProtocolRequest, sendRequest } from './producer/kafkajs-internals';
import { decodedHeaders } from './record-digest';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Decoder = require('kafkajs/src/protocol/decoder');

const WRITE_TXN_MARKERS = 27;
const DESCRIBE_PRODUCERS = 61;
const DESCRIBE_TRANSACTIONS = 65;
const LIST_TRANSACTIONS = 66;

/** A compact array of topics, each with a compact array of partition numbers and empty tagged fields. */
function writeTopicPartitions(encoder: any, topics: Array<{ topic: string; partitions: number[] }>): any {
  encoder.writeUVarInt(topics.length + 1);
  for (const { topic, partitions } of topics) {
    encoder.writeUVarIntString(topic).writeUVarInt(partitions.length + 1);
    for (const p of partitions) encoder.writeInt32(p);
    encoder.writeUVarInt(0);
  }
  return encoder;
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
        return writeTopicPartitions(new Encoder().writeUVarInt(0), topics).writeUVarInt(0);
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
                const lastTimestamp = s.readInt64().toString();
                const coordinatorEpoch = s.readInt32();
                const startOffset = s.readInt64().toString();
                s.readTaggedFields();
                return { producerId, producerEpoch, startOffset, coordinatorEpoch, lastTimestamp };
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

/**
 * WriteTxnMarkers v1 (flexible): a commit or abort marker for one producer's transaction on partitions led by the
 * broker it is sent to; an abort is what `kafka-transactions.sh abort` sends (KIP-664; the ClusterAction
 * permission on the cluster).
 */
export function txnMarkersV1(producerId: string, producerEpoch: number, coordinatorEpoch: number, commit: boolean, topics: Array<{ topic: string; partitions: number[] }>): ProtocolRequest {
  return {
    request: {
      apiKey: WRITE_TXN_MARKERS,
      apiVersion: 1,
      apiName: 'WriteTxnMarkers',
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarInt(2); // header's tagged fields; one marker
        encoder.writeInt64(producerId).writeInt16(producerEpoch).writeBoolean(commit);
        return writeTopicPartitions(encoder, topics).writeInt32(coordinatorEpoch).writeUVarInt(0).writeUVarInt(0);
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

/** DescribeTransactions v0 (KIP-664, flexible), to the transactional ids' coordinator: state, timeout and start time. */
export function describeTransactionsV0(transactionalIds: string[]): ProtocolRequest {
  return {
    request: {
      apiKey: DESCRIBE_TRANSACTIONS,
      apiVersion: 0,
      apiName: 'DescribeTransactions',
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarInt(transactionalIds.length + 1);
        for (const id of transactionalIds) encoder.writeUVarIntString(id);
        return encoder.writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields(); // response header v1
        decoder.readInt32(); // throttle time
        const states: TransactionDescription[] =
          decoder.readUVarIntArray((d: any) => {
            const errorCode = d.readInt16();
            const transactionalId = d.readUVarIntString();
            const state = d.readUVarIntString();
            const timeoutMs = d.readInt32();
            const startTimeMs = d.readInt64().toString();
            const producerId = d.readInt64().toString();
            const producerEpoch = d.readInt16();
            d.readUVarIntArray((t: any) => {
              t.readUVarIntString();
              t.readUVarIntArray((p: any) => p.readInt32());
              t.readTaggedFields();
            });
            d.readTaggedFields();
            return { transactionalId, errorCode, state, timeoutMs, startTimeMs, producerId, producerEpoch };
          }) ?? [];
        return states;
      },
      parse: async (data: unknown) => data,
    },
  };
}

/** One record as KafkaJS's fetch decoder gives it, with what is read of it. */
interface FetchedRecord {
  offset: string;
  timestamp: string;
  key: Buffer | null;
  value?: Buffer | null;
  headers?: Record<string, unknown>;
  isControlRecord: boolean;
  batchContext?: { producerId?: string; inTransaction?: boolean };
}

/** What is asked of a KafkaJS Broker besides its requests by definition. */
interface LogBroker {
  listOffsets(args: object): Promise<{ responses: Array<{ topic: string; partitions: Array<{ partition: number; errorCode?: number; offset: string }> }> }>;
  fetch(args: object): Promise<{ responses: Array<{ partitions: Array<{ errorCode?: number; messages: FetchedRecord[] }> }> }>;
}

const ISOLATION = { committed: 1, uncommitted: 0 } as const;

/**
 * The library's own requests (log-requests.ts) on KafkaJS: a cluster of the library's (cluster.ts: its fetches
 * filtered of aborted transactions, marked as control records), KafkaJS's ListOffsets and Fetch, and the codecs
 * above for what KafkaJS lacks (DescribeProducers, ListTransactions, WriteTxnMarkers).
 */
export class KafkaJsLogRequests extends ClusterClient implements LogRequests {
  async partitionsOf(topic: string, refresh = false): Promise<PartitionLeader[]> {
    await this.connected();
    return partitionLeaders(this.cluster, topic, refresh);
  }

  async brokers(): Promise<number[]> {
    await this.connected();
    // KafkaJS's cluster names its brokers by strings ("1"), whatever its types say.
    return this.cluster.getNodeIds().map(Number);
  }

  async groupCoordinator(groupId: string): Promise<number> {
    await this.connected();
    return (await this.cluster.findGroupCoordinator({ groupId })).nodeId;
  }

  async describeProducers(broker: number, topics: TopicPartitions[]): Promise<PartitionProducers[]> {
    return sendRequest<PartitionProducers[]>(await this.broker(broker), describeProducersV0(topics));
  }

  async listTransactions(broker: number, producerIds: string[]): Promise<TransactionListing[]> {
    return sendRequest<TransactionListing[]>(await this.broker(broker), listTransactionsV0(producerIds));
  }

  async writeTxnMarkers(broker: number, marker: TransactionMarker, topics: TopicPartitions[]): Promise<MarkerAnswer[]> {
    return sendRequest<MarkerAnswer[]>(await this.broker(broker), txnMarkersV1(marker.producerId, marker.producerEpoch, marker.coordinatorEpoch, marker.commit, topics));
  }

  async listOffset(broker: number, topic: string, partition: number, timestamp: number, isolation: Isolation): Promise<bigint> {
    const answer = await (await this.broker(broker)).listOffsets({ replicaId: -1, isolationLevel: ISOLATION[isolation], topics: [{ topic, partitions: [{ partition, timestamp }] }] });
    return BigInt(answer.responses[0].partitions[0].offset);
  }

  async latestOffsets(broker: number, topics: TopicPartitions[], isolation: Isolation): Promise<PartitionOffset[]> {
    const answer = await (await this.broker(broker)).listOffsets({
      replicaId: -1,
      isolationLevel: ISOLATION[isolation],
      topics: topics.map((t) => ({ topic: t.topic, partitions: t.partitions.map((partition) => ({ partition, timestamp: LATEST })) })),
    });
    return answer.responses.flatMap((t) => t.partitions.map((p) => ({ topic: t.topic, partition: p.partition, errorCode: p.errorCode ?? 0, offset: BigInt(p.offset) })));
  }

  async describeTransactions(broker: number, transactionalIds: string[]): Promise<TransactionDescription[]> {
    return sendRequest<TransactionDescription[]>(await this.broker(broker), describeTransactionsV0(transactionalIds));
  }

  async fetch(broker: number, topic: string, partition: number, from: bigint, isolation: Isolation, maxBytes: number): Promise<{ errorCode: number; records: LogRecord[] }> {
    // KafkaJS's Fetch rejects a partition's error code (KafkaJSProtocolError) rather than answer it.
    const answer = await (await this.broker(broker)).fetch({
      replicaId: -1,
      isolationLevel: ISOLATION[isolation],
      maxWaitTime: 100,
      minBytes: 1,
      maxBytes,
      topics: [{ topic, partitions: [{ partition, fetchOffset: from.toString(), maxBytes }] }],
    });
    const got = answer.responses[0]?.partitions[0];
    return {
      errorCode: got?.errorCode ?? 0,
      records: (got?.messages ?? []).map((r) => ({
        offset: r.offset,
        timestamp: r.timestamp,
        key: r.key,
        value: r.value ?? null,
        headers: decodedHeaders(r.headers),
        isControlRecord: r.isControlRecord,
        producerId: String(r.batchContext?.producerId ?? -1),
        inTransaction: r.batchContext?.inTransaction === true,
      })),
    };
  }

  reset(): void {
    this.reconnectNextTime();
  }

  private async broker(nodeId: number): Promise<KafkaJsBroker & LogBroker> {
    await this.connected();
    return (await this.cluster.findBroker({ nodeId })) as KafkaJsBroker & LogBroker;
  }
}

/** The library's own requests on the driver of `kafka` (the module's client): its parts' when set, KafkaJS's otherwise. */
export function logRequestsOf(kafka: KafkaClient): LogRequests {
  return driverPartsOf(kafka)?.logRequests() ?? new KafkaJsLogRequests(kafka);
}
