import { execFile } from 'child_process';
import { existsSync } from 'fs';
import { tmpdir } from 'os';
import { dirname, join } from 'path';

export interface TestKafkaOptions {
  /**
   * The broker's client port on 127.0.0.1 [28092]. Five more ports follow it: the KRaft controller (+1) and the
   * broker's other listeners (+2 to +5). A port in use by another process fails the start with its owner's name.
   * Keep them below the system's ephemeral range (Linux: 32768-60999): a client connection that happened to get
   * one of them as its local port made the broker fail to bind it.
   */
  port?: number;
  /** Data, logs and pid file [<os tmpdir>/kafka-exactly-once-test-<port>]. Reused between runs. */
  stateDirectory?: string;
  /** The Kafka release, 4.x or 3.9.x [4.4.0]. */
  version?: string;
  /** JVM heap [512m]. */
  heap?: string;
  /** Seconds to wait for the broker to answer [90; the first start also fetches the jars with Maven]. */
  startTimeoutSeconds?: number;
}

export interface TestKafka {
  /** Bootstrap brokers for `KafkaExactlyOnceModule.forRoot({ kafka: { brokers } })`. */
  brokers: string[];
  /** True when this call started the broker; `stop()` then stops it. */
  started: boolean;
  /** Stops the broker if this call started it (by its pid file, never by name); otherwise does nothing. */
  stop(): Promise<void>;
}

/**
 * A real single-node Apache Kafka (KRaft) for an application's own tests, without Docker: the broker script
 * the library is tested with (`kafka/kafka.sh` in the package; Linux, with bash, openssl and setsid), on Java 17+ with the jars fetched once from Maven
 * Central by Maven and cached in ~/.cache/kafka-exactly-once. Call it from a test runner's global set-up, and
 * `stop()` from its teardown. With `KAFKA_BROKERS` set (and no `port` given), it starts nothing and returns
 * those brokers, for CI that provides Kafka another way (a service container, Testcontainers: docs/testing.md).
 */
export async function startTestKafka(options: TestKafkaOptions = {}): Promise<TestKafka> {
  const provided = process.env.KAFKA_BROKERS?.trim();
  if (provided && options.port === undefined) {
    return { brokers: provided.split(',').map((b) => b.trim()).filter(Boolean), started: false, stop: async () => undefined };
  }
  const port = options.port ?? 28092;
  if (!Number.isInteger(port) || port < 1024 || port > 65530) throw new RangeError(`startTestKafka: port must be an integer from 1024 to 65530 (six ports from it are used), got ${port}`);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KAFKA_NODES: '1',
    KAFKA_PORT: String(port),
    KAFKA_CONTROLLER_PORT: String(port + 1),
    KAFKA_PROXIED_PORT: String(port + 2),
    KAFKA_PROXY_PORT: String(port + 3),
    KAFKA_SCRAM_PORT: String(port + 4),
    KAFKA_TLS_PORT: String(port + 5),
    KAFKA_STATE_DIR: options.stateDirectory ?? join(tmpdir(), `kafka-exactly-once-test-${port}`),
    KAFKA_START_TIMEOUT: String(options.startTimeoutSeconds ?? 90),
    ...(options.version ? { KAFKA_VERSION: options.version } : {}),
    ...(options.heap ? { KAFKA_HEAP: options.heap } : {}),
  };
  const script = brokerScript();
  const output = await runScript(script, 'start', env).catch(async (err) => {
    // A start that gave up (the broker did not answer in time) may leave the broker's process behind: stopped here,
    // by the pid file kafka.sh wrote, since the caller gets no stop() to call.
    await runScript(script, 'stop', env).catch(() => undefined);
    throw err;
  });
  const started = !/already running/.test(output);
  return {
    brokers: [`127.0.0.1:${port}`],
    started,
    stop: async () => {
      if (started) await runScript(script, 'stop', env);
    },
  };
}

/** kafka.sh: in the installed package (kafka/), or in the library's own repository (scripts/kafka/). */
function brokerScript(): string {
  const candidates: string[] = [];
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    candidates.push(join(dirname(require.resolve('kafka-exactly-once/package.json')), 'kafka', 'kafka.sh'));
  } catch {
    // not installed as a package: the repository's own tests
  }
  candidates.push(join(process.cwd(), 'scripts', 'kafka', 'kafka.sh'));
  const found = candidates.find((c) => existsSync(c));
  if (!found) throw new Error(`startTestKafka: the broker script was not found (looked for ${candidates.join(', ')})`);
  return found;
}

function runScript(script: string, command: 'start' | 'stop', env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', [script, command], { env, maxBuffer: 16 * 1024 * 1024, timeout: 15 * 60 * 1000 }, (error, stdout, stderr) => {
      if (!error) return resolve(`${stdout}${stderr}`);
      const hint = command === 'start' ? ' It needs Linux, bash, Java 17+, Maven (Maven Central reachable) and openssl on this machine; elsewhere, or with Docker, see the Testcontainers recipe in docs/testing.md.' : '';
      reject(new Error(`kafka.sh ${command} failed (${error.code ?? error.signal}): ${`${stderr}${stdout}`.trim().split('\n').slice(-5).join(' | ')}.${hint}`));
    });
  });
}
