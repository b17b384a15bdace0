import { ClusterClient, ProtocolRequest, sendRequest } from './producer/kafkajs-internals';
import { isRebalanceError, sleep } from '../engine/sleep';
import { type CommittedOffsetAnswer, driverPartsOf, type StableOffsetFetcher } from '../client/driver-parts';
import type { KafkaClient } from './client';

// NOTE: KafkaJS 2.2.4 speaks OffsetFetch up to v4, which returns the last *stable* committed offset and says
// nothing of offsets a transaction committed a moment ago whose marker the group coordinator has not applied yet
// (it does so asynchronously, after the transaction is complete and InitProducerId has returned). Read then, the
// committed offset is stale, and records whose Kafka transaction did commit look uncommitted: their recorded
// outputs would be sent a second time. OffsetFetch v7 (KIP-447) has `require_stable`: the broker answers
// UNSTABLE_OFFSET_COMMIT until the pending offsets are applied. KafkaJS has no such request, so this sends one
// through KafkaJS's own cluster and connections (same brokers, TLS, SASL), reached through its private symbols
// (producer/kafkajs-internals.ts: the KafkaJS version is checked, and a spec fails if these internals move).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Decoder = require('kafkajs/src/protocol/decoder');

const OFFSET_FETCH = 9;
const UNSTABLE_OFFSET_COMMIT = 88;
/** Errors after which asking again (after finding the coordinator again) is right. */
const RETRY = new Set([UNSTABLE_OFFSET_COMMIT, 14 /* COORDINATOR_LOAD_IN_PROGRESS */, 15 /* COORDINATOR_NOT_AVAILABLE */, 16 /* NOT_COORDINATOR */]);

type PartitionAnswer = CommittedOffsetAnswer;

/** The OffsetFetch v7 request (flexible), require_stable set. KafkaJS writes request header v1: add its empty tagged fields. */
export function offsetFetchV7(groupId: string, topic: string, partitions: number[]): ProtocolRequest {
  return {
    request: {
      apiKey: OFFSET_FETCH,
      apiVersion: 7,
      apiName: 'OffsetFetch',
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarIntString(groupId).writeUVarInt(2).writeUVarIntString(topic).writeUVarInt(partitions.length + 1);
        for (const partition of partitions) encoder.writeInt32(partition);
        return encoder.writeUVarInt(0).writeBoolean(true).writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields(); // response header v1
        decoder.readInt32(); // throttle time
        const topics = decoder.readUVarIntArray((t: any) => {
          const name = t.readUVarIntString();
          const answers: PartitionAnswer[] = t.readUVarIntArray((p: any) => {
            const partition = p.readInt32();
            const offset = p.readInt64();
            p.readInt32(); // committed leader epoch
            p.readUVarIntString(); // metadata
            const errorCode = p.readInt16();
            p.readTaggedFields();
            return { partition, offset, errorCode };
          });
          t.readTaggedFields();
          return { name, answers };
        });
        const errorCode = decoder.readInt16();
        return { errorCode, answers: (topics ?? []).flatMap((t: { answers: PartitionAnswer[] }) => t.answers ?? []) };
      },
      parse: async (data: unknown) => data,
    },
  };
}

/** Called while offsets are unstable: a consumer's heartbeat, so that its membership outlives the wait. */
export interface WhileWaiting {
  heartbeat: () => Promise<void>;
  everyMs: number;
}

/** The group's offsets stayed pending (UNSTABLE_OFFSET_COMMIT) for the whole wait: a transaction holds them. */
export class UnstableOffsetsError extends Error {
  constructor(
    readonly groupId: string,
    readonly topic: string,
    readonly partitions: number[],
    readonly waitedMs: number,
  ) {
    super(`the committed offsets of group ${groupId} for ${topic}[${partitions.join(',')}] stayed pending (UNSTABLE_OFFSET_COMMIT, error 88) for ${waitedMs} ms: a transaction holds them`);
    this.name = 'UnstableOffsetsError';
  }
}

/**
 * The consumer group's committed offsets that are stable: no transaction's offsets are pending for them. Used
 * after InitProducerId, so that a transaction that committed just before is never taken for one that did not.
 */
export class StableOffsets {
  private readonly fetcher: StableOffsetFetcher;

  /** On the module's driver: KafkaJS's connections (the request below), or the other driver's (client/driver-parts.ts). */
  constructor(kafka: KafkaClient) {
    this.fetcher = driverPartsOf(kafka)?.stableOffsets() ?? new KafkaJsStableOffsets(kafka);
  }

  async disconnect(): Promise<void> {
    await this.fetcher.disconnect();
  }

  /** The committed offset (-1 for none) of a partition, waiting (at most `timeoutMs`) while it is unstable. */
  async committed(groupId: string, topic: string, partition: number, timeoutMs = 60000, waiting?: WhileWaiting): Promise<bigint> {
    return (await this.committedOffsets(groupId, topic, [partition], timeoutMs, waiting)).get(partition) as bigint;
  }

  /**
   * The committed offsets (-1 for none) of partitions of a topic, waiting (at most `timeoutMs`) while any is
   * unstable; `waiting.heartbeat` is called every `waiting.everyMs` meanwhile (a consumer's membership). Still
   * unstable at the end: UnstableOffsetsError.
   */
  async committedOffsets(groupId: string, topic: string, partitions: number[], timeoutMs = 60000, waiting?: WhileWaiting): Promise<Map<number, bigint>> {
    const deadline = Date.now() + timeoutMs;
    let beat = Date.now();
    const sleepWaiting = async (ms: number) => {
      await sleep(ms);
      if (waiting && Date.now() - beat >= waiting.everyMs) {
        beat = Date.now();
        // A rebalance ends the wait (the member must rejoin); other heartbeat errors say nothing here.
        await waiting.heartbeat().catch((err) => {
          if (isRebalanceError(err)) throw err;
        });
      }
    };
    for (let attempt = 1; ; attempt++) {
      let code: number;
      try {
        const answer = await this.fetcher.fetch(groupId, topic, partitions);
        code = answer.errorCode || answer.answers.find((a) => a.errorCode !== 0)?.errorCode || 0;
        if (code === 0) return new Map(partitions.map((p) => [p, answer.answers.find((a) => a.partition === p)?.offset ?? -1n]));
      } catch (err) {
        this.fetcher.reset();
        if (Date.now() > deadline) throw err;
        await sleepWaiting(Math.min(1000, 50 * 2 ** attempt));
        continue;
      }
      if (code === UNSTABLE_OFFSET_COMMIT && Date.now() > deadline) throw new UnstableOffsetsError(groupId, topic, partitions, timeoutMs);
      if (!RETRY.has(code) || Date.now() > deadline) {
        throw new Error(`OffsetFetch of ${topic}[${partitions.join(',')}] for group ${groupId} failed with error code ${code}`);
      }
      await sleepWaiting(Math.min(1000, 20 * 2 ** attempt));
    }
  }
}

/** OffsetFetch v7 with require_stable on KafkaJS's cluster and connections (KafkaJS has no such request). */
class KafkaJsStableOffsets extends ClusterClient implements StableOffsetFetcher {
  async fetch(groupId: string, topic: string, partitions: number[]): Promise<{ errorCode: number; answers: PartitionAnswer[] }> {
    await this.connected();
    const coordinator = await this.cluster.findGroupCoordinator({ groupId });
    return sendRequest<{ errorCode: number; answers: PartitionAnswer[] }>(coordinator, offsetFetchV7(groupId, topic, partitions));
  }

  reset(): void {
    this.reconnectNextTime();
  }
}
