import { Kafka, logLevel } from 'kafkajs';
import { kafkaBrokers } from '../support/environment';
import { uniqueTopicStamp } from '../support/kafka';

/**
 * Before each suite, the topics the earlier suites of this run made are deleted (KEO_KEEP_TOPICS=1 keeps them):
 * only those stamped between the run's start (KEO_RUN_STARTED, from the global set-up) and this suite's, and only
 * when the suites run one at a time (another run on the same broker, or suites running in parallel, keep theirs).
 * Every suite names its topics with uniqueTopic (test.<label>.<base-36 ms>.<8 hex>, and names derived from it),
 * so that none is shared; but a broker restarts slower with each partition it holds (it loads each log), and
 * the suites that stop, kill or freeze the broker restarted it with thousands of partitions late in a run.
 */
const STARTED = Date.now();

beforeAll(async () => {
  const since = Number(process.env.KEO_RUN_STARTED);
  if (process.env.KEO_KEEP_TOPICS === '1' || process.env.KEO_RUN_SERIAL !== '1' || !Number.isFinite(since)) return;
  const admin = new Kafka({ clientId: 'kafka-exactly-once-tests-cleanup', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING, retry: { retries: 2 } }).admin();
  try {
    await admin.connect();
    const earlier = (await admin.listTopics()).filter((t) => {
      const stamp = uniqueTopicStamp(t);
      return stamp !== undefined && stamp >= since && stamp < STARTED - 1000;
    });
    for (let i = 0; i < earlier.length; i += 200) await admin.deleteTopics({ topics: earlier.slice(i, i + 200), timeout: 20000 });
  } catch {
    // A broker that is not there yet (a suite that starts it) or refuses: the suite runs on with the topics kept.
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}, 90000);
