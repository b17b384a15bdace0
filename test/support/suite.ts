import { Kafka } from 'kafkajs';
import { testKafka } from './kafka';
import { ProcessGroup } from './processes';

/**
 * The set-up every process-based suite shares: a KafkaJS client for the test's own reads and writes, and the
 * group of child processes the suite starts, all killed in afterAll even when a test failed half-way.
 */
export function processSuite(): { processes: ProcessGroup; kafka: () => Kafka } {
  const processes = new ProcessGroup();
  let kafka: Kafka | undefined;
  beforeAll(() => {
    kafka = testKafka();
  });
  afterAll(async () => {
    await processes.killAll();
  });
  return { processes, kafka: () => kafka as Kafka };
}
