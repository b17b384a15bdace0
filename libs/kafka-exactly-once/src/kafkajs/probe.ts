import { logLevel } from 'kafkajs';
import type { ResolvedOptions } from '../options/resolved-options';
import { createKafkaClient, type KafkaClient } from './client';
import { nestLogCreator } from './logger';

/**
 * A Kafka client of the library (client.ts) for one-shot questions to the brokers (is Kafka there, do the topics exist), on the
 * application's connection options but with short retries: an admin's own `retry` does not reach its
 * connection, so with the application's client a cluster that is away holds each question for the whole retry
 * schedule (about 10 s with KafkaJS's defaults). It still tries another bootstrap broker when one is down
 * (each retry picks one), within about a second. Whoever asks decides when to ask again.
 */
export function createProbeClient(options: Pick<ResolvedOptions, 'kafka'>): KafkaClient {
  return createKafkaClient({ ...options.kafka, retry: probeRetry(options), logLevel: logLevel.INFO, logCreator: nestLogCreator });
}

/** A probe's retries: a try per bootstrap broker (at least one, at most five), 100 ms to 1 s apart. */
export function probeRetry(options: Pick<ResolvedOptions, 'kafka'>): NonNullable<ResolvedOptions['kafka']['retry']> {
  const brokers = Array.isArray(options.kafka.brokers) ? options.kafka.brokers.length : 2;
  return { ...options.kafka.retry, retries: Math.min(5, Math.max(1, brokers)), initialRetryTime: 100, maxRetryTime: 1000 };
}
