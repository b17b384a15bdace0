import { createProbeClient, type KafkaClient, probeRetry } from '../kafkajs';
import type { ResolvedOptions } from '../options/resolved-options';
import { platformaticParts } from '../platformatic/driver-parts';
import { PlatformaticGroupConsumer } from '../platformatic/group-consumer';
import { useDriverParts } from './driver-parts';
import type { GroupConsumer } from './group-consumer';
import type { GroupConsumers, KafkaConnectionOptions, KafkaDriverName } from './drivers';

/**
 * The consumer groups of the module's `driver`: KafkaJS's consumer on the library's corrected group (the KafkaJS
 * room's client, `kafka`), or the @platformatic/kafka group (src/platformatic), on the same connection options.
 */
export function groupConsumersOf(driver: KafkaDriverName, kafka: KafkaClient, connection: KafkaConnectionOptions): GroupConsumers {
  if (driver === 'platformatic') return (config) => new PlatformaticGroupConsumer(connection, config);
  // KafkaJS's Consumer has these members (its `on` is overloaded per event, which TypeScript cannot match to the
  // generic signature): library.kafkajs-room runs the engine on it.
  return (config) => kafka.consumer(config) as unknown as GroupConsumer;
}

/**
 * A client for one-shot questions to the brokers (kafkajs/probe.ts: short retries), on the module's driver: its
 * admin (adminOf) is the platformatic driver's when the module's driver is `platformatic`.
 */
export function probeClient(options: Pick<ResolvedOptions, 'kafka' | 'driver'>): KafkaClient {
  const probe = createProbeClient(options);
  if (options.driver === 'platformatic') useDriverParts(probe, platformaticParts({ ...options.kafka, retry: probeRetry(options) }));
  return probe;
}
