import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { Admin, Kafka, logLevel } from 'kafkajs';
import { KafkaExactlyOnceLifecycle, waitForTopicLeaders } from 'kafka-exactly-once';
import { ConsumerAppConfig, consumerAppConfig } from '../consumer-app.config';
import { DEMO_TOPICS } from './demo-topics';

/**
 * Creates the demo topics when they do not exist yet, then starts the module's consumer (the module has
 * `autoStart: false`: it must not look for the topics before they exist). In the background: while Kafka is
 * away the application serves HTTP and /health (down, naming Kafka), and the topics and the consumer follow
 * when Kafka answers.
 */
@Injectable()
export class DemoTopicsInitializer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(DemoTopicsInitializer.name);
  private stopping = false;
  private work?: Promise<void>;

  constructor(private readonly lifecycle: KafkaExactlyOnceLifecycle) {}

  onApplicationBootstrap(): void {
    this.work = this.createTopicsThenStart().catch((err: Error) => {
      // A wrong configuration (the module's checks): the demo cannot go on.
      this.logger.error(`the consumer cannot start: ${err.stack ?? err.message}`);
      process.exit(1);
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    await this.work;
  }

  private async createTopicsThenStart(): Promise<void> {
    const config = consumerAppConfig();
    for (let attempt = 1; !this.stopping; attempt++) {
      const admin = new Kafka({ clientId: 'consumer-app-topics', brokers: config.kafkaBrokers, logLevel: logLevel.NOTHING, retry: { retries: 0 } }).admin();
      try {
        await admin.connect();
        await this.ensureTopics(admin, config);
        break;
      } catch (err) {
        // Kafka away, or (on a cluster) a topic created a moment ago not everywhere yet: try again.
        if (attempt === 1 || (attempt & (attempt - 1)) === 0) this.logger.warn(`creating the demo topics failed (${(err as Error).message}); trying again (attempt ${attempt})`);
        await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * 2 ** attempt)));
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
    }
    if (!this.stopping) await this.lifecycle.start();
  }

  private async ensureTopics(admin: Admin, config: ConsumerAppConfig): Promise<void> {
    const existing = new Set(await admin.listTopics());
    const missing = Object.values(DEMO_TOPICS)
      .map((topic) => `${config.topicPrefix}${topic}`)
      .filter((topic) => !existing.has(topic));
    if (missing.length > 0) {
      await admin.createTopics({
        waitForLeaders: false, // waited for below, with KRaft's "not yet" answers retried
        topics: missing.map((topic) => ({ topic, numPartitions: config.topicPartitions, replicationFactor: config.topicReplicationFactor })),
      });
      this.logger.log(`created ${missing.join(', ')} (${config.topicPartitions} partitions)`);
    }
    // Topics created a moment ago (here or by another instance starting at the same time) may not be served
    // by their leaders yet: wait, rather than fail the consumer's start with "does not host this topic-partition".
    await waitForTopicLeaders(admin, Object.values(DEMO_TOPICS).map((topic) => `${config.topicPrefix}${topic}`));
  }
}
