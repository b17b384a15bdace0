import { spawnSync } from 'child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import type { Kafka } from 'kafkajs';
import { HEADERS, SchemaRegistry } from 'kafka-exactly-once';
import { decodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { REPO_ROOT } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase } from './support/library';
import { waitForGroupCaughtUp } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';

/**
 * The library as users get it: `npm pack` makes the tarball, and each application under examples/ is copied
 * OUTSIDE the repository (so that nothing resolves from the repository's node_modules), installs that tarball
 * and its peers from the registry, compiles against the packed type declarations, and runs on the machine's
 * Node.js and on Node.js 24 against the real broker and PostgreSQL: orders published through EventPublisher,
 * every tenth twice, are applied once each, and each customer's outputs carry running totals in input order.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { pack } = require('../scripts/pack.js') as { pack(): { tarball: string } };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { nodeBinary } = require('../scripts/node/node-binary.js') as { nodeBinary(major: string): string };

const EXAMPLES = ['nest11-commonjs', 'nest12-esm'];
const ORDERS = 120;
const CUSTOMERS = 7;

interface Runtime {
  label: string;
  node: string;
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): string {
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} in ${cwd} failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

function runtimes(): Runtime[] {
  const node24 = nodeBinary('24');
  const own = { label: `Node ${process.versions.node} (this machine's)`, node: process.execPath };
  const version = run(node24, ['--version'], REPO_ROOT).trim();
  return version === `v${process.versions.node}` ? [own] : [own, { label: `Node ${version.slice(1)}`, node: node24 }];
}

describe('the packed library in applications of their own', () => {
  const processes = new ProcessGroup();
  const workspace = mkdtempSync(join(tmpdir(), 'kafka-eo-examples-'));
  let kafka: Kafka;
  let nodes: Runtime[];

  beforeAll(() => {
    kafka = testKafka('package-examples');
    const { tarball } = pack();
    nodes = runtimes();
    for (const example of EXAMPLES) {
      const dir = join(workspace, example);
      cpSync(join(REPO_ROOT, 'examples', example), dir, { recursive: true, filter: (src) => !/\/(node_modules|dist)$/.test(src) });
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
      expect(manifest.dependencies['kafka-exactly-once']).toBe('file:../../dist/packages/kafka-exactly-once.tgz');
      manifest.dependencies['kafka-exactly-once'] = `file:${tarball}`;
      writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
      run('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error'], dir);
      run('npm', ['run', 'build'], dir); // tsc against the tarball's .d.ts files
      // @nestjs/microservices is an optional peer: the Nest 11 example runs without it (the main entry does not
      // need it), the Nest 12 one uses kafka-exactly-once/microservices with it.
      expect(existsSync(join(dir, 'node_modules', '@nestjs', 'microservices'))).toBe(example === 'nest12-esm');
    }
  }, 600000);

  afterAll(async () => {
    await processes.killAll();
    rmSync(workspace, { recursive: true, force: true });
  });

  // One case per example and Node.js version: the table is built in beforeAll (Node 24 is fetched there).
  for (const example of EXAMPLES) {
    for (const which of ['machine', 'node24'] as const) {
      it(`${example} on ${which === 'machine' ? "this machine's Node.js" : 'Node.js 24'}: each order applied once, outputs in order per customer, clean stop`, async () => {
        const runtime = which === 'machine' ? nodes[0] : nodes[1];
        if (!runtime) {
          // This machine's Node.js is the pinned Node 24 already: the first case ran on it.
          expect(nodes[0].node).toBe(process.execPath);
          return;
        }
        const dir = join(workspace, example);
        const label = `${example}-${which}`.replace(/[^a-z0-9]/g, '-');
        const env = {
          KAFKA_BROKERS: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092'),
          DATABASE_URL: await createSuiteDatabase(label),
          ORDERS_TOPIC: uniqueTopic(`${label}-orders`),
          ACCEPTED_TOPIC: uniqueTopic(`${label}-accepted`),
          GROUP_ID: uniqueTopic(`${label}-group`),
          SPOOL_DIR: join(dir, `.spool-${which}`),
        };
        await createTopics(kafka, [env.ORDERS_TOPIC, env.ACCEPTED_TOPIC], 3);

        const logFile = join(REPO_ROOT, '.test-logs', 'examples', `${label}.log`);
        const app = processes.add(new AppProcess(label, join(dir, 'dist/main.js'), env, logFile, { node: runtime.node, cwd: dir }));
        await app.waitForLog(new RegExp(`handling ${env.ORDERS_TOPIC} as group ${env.GROUP_ID} on Node ${runtime.label.split(' ')[1]}`), 90000);

        const summary = JSON.parse(run(runtime.node, ['dist/publish-orders.js', String(ORDERS), String(CUSTOMERS)], dir, { ...process.env, ...env }).trim().split('\n').pop() as string);
        expect(summary).toEqual({ published: ORDERS, duplicates: ORDERS / 10, spooled: 0 });
        await waitForGroupCaughtUp(kafka, env.GROUP_ID, env.ORDERS_TOPIC, 120000);

        // PostgreSQL: one row per order (a second apply of a duplicate would have failed on the primary key and
        // been dead-lettered instead).
        const rows = await queryDatabase(env.DATABASE_URL, 'SELECT order_id, amount_cents::text AS amount FROM example_orders ORDER BY order_id');
        expect(rows).toHaveLength(ORDERS);
        expect(new Set(rows.map((r) => r.order_id)).size).toBe(ORDERS);

        // Kafka, read committed: one OrderAccepted per order, running totals per customer in publish order.
        const registry = SchemaRegistry.fromDirectory(join(dir, 'schemas'));
        const accepted = registry.current('com.example.OrderAccepted');
        const records = await readTopic(kafka, env.ACCEPTED_TOPIC, { until: (rs) => rs.length >= ORDERS, pollIdleMs: 2000, timeoutMs: 60000 });
        expect(records).toHaveLength(ORDERS);
        expect(new Set(records.map((r) => r.headers[HEADERS.messageId])).size).toBe(ORDERS);
        const outputs = records
          .sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)))
          .map((r) => decodeSingleObject(registry, accepted, r.value as Buffer) as { orderId: string; customerId: string; amountCents: bigint; customerTotalCents: bigint });
        const totals = new Map<string, bigint>();
        const seen = new Map<string, number>();
        for (const output of outputs) {
          const index = Number(output.orderId.slice('order-'.length));
          expect(output.customerId).toBe(`customer-${index % CUSTOMERS}`);
          expect(index).toBeGreaterThan(seen.get(output.customerId) ?? -1); // in input order per customer
          seen.set(output.customerId, index);
          const total = (totals.get(output.customerId) ?? 0n) + BigInt(100 + index);
          totals.set(output.customerId, total);
          expect(output.customerTotalCents).toBe(total);
        }
        expect(totals.size).toBe(CUSTOMERS);

        // SIGTERM drains and exits; neither Node.js nor a dependency printed a warning (Node 24 did, from KafkaJS,
        // before the library's fix of its request queue).
        await app.stop(30000);
        expect(app.running).toBe(false);
        expect(app.logs()).toMatch(/consumer stopped: in-flight work committed or rolled back/);
        expect(app.logs()).not.toMatch(/\(node:\d+\) \w*Warning/);
      }, 300000);
    }
  }
});
