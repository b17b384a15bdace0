import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { Admin, Kafka, logLevel } from 'kafkajs';
import { waitForTopicLeaders } from 'kafka-exactly-once';
import { ConsumerAppConfig, consumerAppConfig } from '../consumer-app.config';
import { DEMO_TOPICS } from './demo-topics';

/** Creates the demo topics when they do not exist yet, before the consumer starts (module init precedes bootstrap). */
@Injectable()
export class DemoTopicsInitializer implements OnModuleInit {
  private readonly logger = new Logger(DemoTopicsInitializer.name);

  async onModuleInit(): Promise<void> {
    const config = consumerAppConfig();
    const admin = new Kafka({ clientId: 'consumer-app-topics', brokers: config.kafkaBrokers, logLevel: logLevel.WARN }).admin();
    await admin.connect();
    try {
      // On a cluster, a topic created a moment ago reaches every node's metadata a little later, and KafkaJS's
      // createTopics gives up on "This server does not host this topic-partition": retriable errors are retried.
      for (let attempt = 1; ; attempt++) {
        try {
          await this.ensureTopics(admin, config);
          return;
        } catch (err) {
          if ((err as { retriable?: boolean }).retriable !== true || attempt >= 10) throw err;
          this.logger.warn(`creating the demo topics failed (${(err as Error).message}); retrying (attempt ${attempt})`);
          await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * 2 ** attempt)));
        }
      }
    } finally {
      await admin.disconnect();
    }
  }

  private async ensureTopics(admin: Admin, config: ConsumerAppConfig): Promise<void> {
    const existing = new Set(await admin.listTopics());
    const missing = Object.values(DEMO_TOPICS)
      .map((topic) => `${config.topicPrefix}${topic}`)
      .filter((topic) => !existing.has(topic));
    if (missing.length > 0) {
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((topic) => ({ topic, numPartitions: config.topicPartitions, replicationFactor: config.topicReplicationFactor })),
      });
      this.logger.log(`created ${missing.join(', ')} (${config.topicPartitions} partitions)`);
    }
    // Topics created a moment ago (here or by another instance starting at the same time) may not be served
    // by their leaders yet: wait, rather than fail the consumer's start with "does not host this topic-partition".
    await waitForTopicLeaders(admin, Object.values(DEMO_TOPICS).map((topic) => `${config.topicPrefix}${topic}`));
  }
}
