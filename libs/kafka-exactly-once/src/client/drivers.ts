import type { KafkaConfig } from 'kafkajs';
import type { GroupConsumer, GroupConsumerConfig } from './group-consumer';

/**
 * The Kafka clients the library runs on (the module's `driver` option): `kafkajs`, KafkaJS 2.2.4 with the
 * library's corrections (src/kafkajs), and `platformatic`, @platformatic/kafka (src/platformatic), on which the consumer
 * group and the library's producers run while the library's own requests and admin stay on KafkaJS's room
 * (docs/drivers.md says what each part runs on).
 */
export const KAFKA_DRIVERS = ['kafkajs', 'platformatic'] as const;
export type KafkaDriverName = (typeof KAFKA_DRIVERS)[number];

/** How the library reaches Kafka: the module's `kafka` options, in KafkaJS's names whichever driver runs. */
export type KafkaConnectionOptions = Pick<KafkaConfig, 'clientId' | 'brokers' | 'ssl' | 'sasl' | 'connectionTimeout' | 'requestTimeout' | 'retry'>;

/** Makes the consumer of one consumer group (the engine's, ExactlyOnceConsumer). */
export type GroupConsumers = (config: GroupConsumerConfig) => GroupConsumer;
