import type { ClusterAdmin } from '../kafkajs';
import type { LogRequests } from './log-requests';
import type { ProducerDriver } from './producer-parts';

/** One partition's committed offset in an OffsetFetch answer (-1: none). */
export interface CommittedOffsetAnswer {
  partition: number;
  offset: bigint;
  errorCode: number;
}

/**
 * OffsetFetch with require_stable (v7 or later) to a group's coordinator, on a driver's connections: the answer with
 * its error codes (UNSTABLE_OFFSET_COMMIT among them), or a rejection when no coordinator answered.
 */
export interface StableOffsetFetcher {
  fetch(groupId: string, topic: string, partitions: number[]): Promise<{ errorCode: number; answers: CommittedOffsetAnswer[] }>;
  /** After a failed fetch: find the coordinator (and connect) afresh next time. */
  reset(): void;
  disconnect(): Promise<void>;
}

/** What a driver other than KafkaJS brings for the library's producers and its own requests. */
export interface DriverParts {
  producers: ProducerDriver;
  stableOffsets(): StableOffsetFetcher;
  /** The library's own requests to single brokers (hanging transactions, partition reads), on connections of their own. */
  logRequests(): LogRequests;
  /** An admin on connections of its own (KafkaJS's `admin(options)`: its answers in KafkaJS's shapes). */
  admin(options?: AdminOptions): ClusterAdmin;
}

/** What an admin takes (KafkaJS's `admin({ retry })`). */
export interface AdminOptions {
  retry?: { retries?: number; initialRetryTime?: number; maxRetryTime?: number };
}

const drivers = new WeakMap<object, DriverParts>();

/**
 * The library's producers and requests made from `kafka` (the module's client, which every part of the library that
 * talks to Kafka is given) run on `parts` rather than on KafkaJS: set once by the module when its driver is
 * `platformatic`.
 */
export function useDriverParts(kafka: object, parts: DriverParts): void {
  drivers.set(kafka, parts);
}

/** The parts set for `kafka` (useDriverParts); undefined: KafkaJS's. */
export function driverPartsOf(kafka: object): DriverParts | undefined {
  return drivers.get(kafka);
}
