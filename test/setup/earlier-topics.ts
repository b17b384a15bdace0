import { Kafka, logLevel } from 'kafkajs';
import { kafkaBrokers } from '../support/environment';

/**
 * Before each suite, the topics the earlier suites of the run made are deleted (KEO_KEEP_TOPICS=1 keeps them).
 * Every suite names its topics with uniqueTopic (test.<label>.<base-36 ms>.<8 hex>, and names derived from it),
 * so that none is shared; but a broker restarts slower with each partition it holds (it loads each log), and
 * the suites that stop, kill or freeze the broker restarted it with thousands of partitions late in a run.
 */
const STARTED = Date.now();

/** True for a name of uniqueTopic's form stamped before `before` (ms). */
export function earlierSuiteTopic(name: string, before: number): boolean {
  const stamp = /^test\..*?\.([0-9a-z]{8,9})\.[0-9a-f]{8}(?:[.-]|$)/.exec(name)?.[1];
  if (!stamp) return false;
  const ms = parseInt(stamp, 36);
  return ms > Date.UTC(2025, 0, 1) && ms < before;
}

beforeAll(async () => {
  if (process.env.KEO_KEEP_TOPICS === '1') return;
  const admin = new Kafka({ clientId: 'kafka-exactly-once-tests-cleanup', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING, retry: { retries: 2 } }).admin();
  try {
    await admin.connect();
    const earlier = (await admin.listTopics()).filter((t) => earlierSuiteTopic(t, STARTED - 1000));
    for (let i = 0; i < earlier.length; i += 200) await admin.deleteTopics({ topics: earlier.slice(i, i + 200), timeout: 30000 });
  } catch {
    // A broker that is not there yet (a suite that starts it) or refuses: the suite runs on with the topics kept.
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}, 60000);
