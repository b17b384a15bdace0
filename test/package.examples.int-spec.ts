import { spawn, spawnSync } from 'child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { dirname, join } from 'path';
import type { Kafka } from 'kafkajs';
import { HEADERS, SchemaRegistry } from 'kafka-exactly-once';
import { decodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { REPO_ROOT, adminDatabaseUrl, kafkaBrokers } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase } from './support/library';
import { waitForGroupCaughtUp } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';

/**
 * The library as users get it: `npm pack` makes the tarball, and each application under examples/ is copied
 * OUTSIDE the repository (so that nothing resolves from the repository's node_modules), installs that tarball
 * and its peers from the registry (without a peer dependency warning: Nest 11 with TypeORM 0.3, Nest 12 with
 * TypeORM 1, Nest 11 with Prisma 7 and no TypeORM), compiles against the packed type declarations (the Prisma one
 * after `prisma generate`, offline), and runs against the real broker and PostgreSQL (the TypeORM ones on the
 * machine's Node.js, on Node.js 22 and on Node.js 24, the Prisma one on the machine's): orders published through
 * EventPublisher, every tenth twice, are applied once each, and each customer's outputs carry running totals in
 * input order. The examples' own end-to-end tests run too, through kafka-exactly-once/testing: the Nest 12 one
 * under Vitest and under Jest's ESM mode on each Node.js version, the Nest 11 ones under Jest.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { pack } = require('../scripts/pack.js') as { pack(): { tarball: string } };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { nodeBinary } = require('../scripts/node/node-binary.js') as { nodeBinary(major: string): string };

const EXAMPLES = ['nest11-commonjs', 'nest12-esm', 'nest11-prisma'];
/** The TypeORM line each example installs (its package.json), checked after the install; null: none installed. */
const TYPEORM_MAJOR: Record<string, string | null> = { 'nest11-commonjs': '0', 'nest12-esm': '1', 'nest11-prisma': null };
/**
 * Extra Node.js versions beside the machine's, by major (scripts/node/node-binary.js pins each): 22 and 24, or those
 * KEO_EXAMPLE_NODES names (CI runs the examples on the machine's 20 and on 24, the ends of the supported range).
 */
const OTHER_NODES = (process.env.KEO_EXAMPLE_NODES ?? '22,24').split(',').map((n) => n.trim()).filter(Boolean);
if (OTHER_NODES.length === 0 || OTHER_NODES.some((n) => !['22', '24'].includes(n))) throw new Error(`KEO_EXAMPLE_NODES names Node.js majors among 22 and 24, got "${process.env.KEO_EXAMPLE_NODES}"`);
/**
 * The Node.js versions each example runs on: the TypeORM ones on all three, the Prisma one on the machine's only
 * (its Node.js-specific code is the library's, which the other two run on each version).
 */
const NODES_OF: Record<string, string[]> = { 'nest11-commonjs': ['machine', ...OTHER_NODES], 'nest12-esm': ['machine', ...OTHER_NODES], 'nest11-prisma': ['machine'] };
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

/** Runs a command to its end without blocking the event loop; resolves with its stdout and stderr together. */
function runAsync(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${command} ${args.join(' ')} in ${cwd} failed (${code}):\n${output}`))));
  });
}

function runtimes(): Runtime[] {
  const own = { label: `Node ${process.versions.node} (this machine's)`, node: process.execPath };
  const others = OTHER_NODES.map((major) => nodeBinary(major))
    .map((node) => ({ node, version: run(node, ['--version'], REPO_ROOT).trim().slice(1) }))
    .filter((n) => n.version !== process.versions.node)
    .map((n) => ({ label: `Node ${n.version}`, node: n.node }));
  return [own, ...others];
}

describe('the packed library in applications of their own', () => {
  const processes = new ProcessGroup();
  const workspace = mkdtempSync(join(tmpdir(), 'kafka-eo-examples-'));
  // `prisma generate` offline (the Prisma example's README): any file as the schema engine it would download.
  const noSchemaEngine = join(workspace, 'no-schema-engine');
  const offline = { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: noSchemaEngine, PRISMA_HIDE_UPDATE_MESSAGE: '1' };
  let kafka: Kafka;
  let nodes: Runtime[];

  beforeAll(async () => {
    kafka = testKafka('package-examples');
    const { tarball } = pack();
    nodes = runtimes();
    writeFileSync(noSchemaEngine, '');
    // The examples install and build at the same time: npm's installs wait on the registry more than on the CPU.
    await Promise.all(
      EXAMPLES.map(async (example) => {
        const dir = join(workspace, example);
        // Without what a build left in the repository's copy (the Prisma client is generated in the copy's build).
        cpSync(join(REPO_ROOT, 'examples', example), dir, { recursive: true, filter: (src) => !/\/(node_modules|dist|src\/generated|\.spool[^/]*)$/.test(src) });
        const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
        expect(manifest.dependencies['kafka-exactly-once']).toBe('file:../../dist/packages/kafka-exactly-once.tgz');
        manifest.dependencies['kafka-exactly-once'] = `file:${tarball}`;
        writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
        // Warnings are printed, and none may be about a peer dependency (npm 11 prints a conflict it overrides as
        // "ERESOLVE overriding peer dependency").
        const install = await runAsync('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=warn'], dir);
        expect(install.split('\n').filter((line) => /peer|ERESOLVE/i.test(line))).toEqual([]);
        const typeormManifest = join(dir, 'node_modules', 'typeorm', 'package.json');
        const typeorm = existsSync(typeormManifest) ? (JSON.parse(readFileSync(typeormManifest, 'utf8')).version as string) : undefined;
        expect(typeorm?.split('.')[0] ?? null).toBe(TYPEORM_MAJOR[example]);
        await runAsync('npm', ['run', 'build'], dir, offline); // (prisma generate, then) tsc against the tarball's .d.ts files
        // @nestjs/microservices is an optional peer: the Nest 11 example runs without it (the main entry does not
        // need it), the Nest 12 one uses kafka-exactly-once/microservices with it.
        expect(existsSync(join(dir, 'node_modules', '@nestjs', 'microservices'))).toBe(example === 'nest12-esm');
      }),
    );
  }, 600000);

  afterAll(async () => {
    await processes.killAll();
    rmSync(workspace, { recursive: true, force: true });
  });

  /** The runtime of a case: this machine's Node.js, or a pinned one (undefined when it is the machine's own). */
  function runtimeOf(which: string): Runtime | undefined {
    if (which === 'machine') return nodes[0];
    return nodes.find((n) => n.label.startsWith(`Node ${which}.`));
  }
  const WHICH = ['machine', ...OTHER_NODES];
  const named = (which: string) => (which === 'machine' ? "this machine's Node.js" : `Node.js ${which}`);

  // One case per example and Node.js version: the table is built in beforeAll (Node 22 and 24 are fetched there).
  for (const example of EXAMPLES) {
    for (const which of NODES_OF[example]) {
      it(`${example} on ${named(which)}: each order applied once, outputs in order per customer, clean stop`, async () => {
        const runtime = runtimeOf(which);
        if (!runtime) {
          // This machine's Node.js is that pinned version already: the machine's case ran on it.
          expect(process.versions.node.split('.')[0]).toBe(which);
          return;
        }
        const dir = join(workspace, example);
        const label = `${example}-${which}`.replace(/[^a-z0-9]/g, '-');
        const env = {
          KAFKA_BROKERS: kafkaBrokers().join(','),
          DATABASE_URL: await createSuiteDatabase(label),
          ORDERS_TOPIC: uniqueTopic(`${label}-orders`),
          ACCEPTED_TOPIC: uniqueTopic(`${label}-accepted`),
          GROUP_ID: uniqueTopic(`${label}-group`),
          SPOOL_DIR: join(dir, `.spool-${which}`),
          OUTBOX_CHECKPOINT_TOPIC: uniqueTopic(`${label}-outbox-checkpoints`),
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

  // The examples' own tests (examples/*/test), as their teams run them, through kafka-exactly-once/testing: the
  // Nest 12 one under Vitest (`npm test`) on each Node.js version and under Jest in ESM mode (`npm run test:jest`)
  // on the newest (the ESM loader of Jest is the same code on each), the Nest 11 ones under Jest (CommonJS). Two runs
  // start their own broker from the package's kafka/kafka.sh (startTestKafka without KAFKA_BROKERS, on ports
  // 28092-28097), once through each build, and stop it; the others use this run's broker.
  const OWN_TESTS = [
    ...WHICH.map((which) => ({ example: 'nest12-esm', runner: 'Vitest', which, ownBroker: which === 'machine', tests: 2 })),
    { example: 'nest12-esm', runner: 'Jest (ESM)', which: OTHER_NODES[OTHER_NODES.length - 1], ownBroker: false, tests: 2 },
    // Nest 11's also places orders through the outbox in a @nestjs-cls/transactional @Transactional() method.
    { example: 'nest11-commonjs', runner: 'Jest', which: 'machine', ownBroker: true, tests: 4 },
    // Prisma's: a handler writing through ctx.db, an order placed through the outbox in prisma.$transaction.
    { example: 'nest11-prisma', runner: 'Jest', which: 'machine', ownBroker: false, tests: 4 },
  ];
  for (const { example, runner, which, ownBroker, tests } of OWN_TESTS) {
    it(`${example}'s own ${runner} suite on ${named(which)}${ownBroker ? ', with a broker that startTestKafka starts' : ''}`, async () => {
      const runtime = runtimeOf(which);
      if (!runtime) {
        expect(process.versions.node.split('.')[0]).toBe(which);
        return;
      }
      const dir = join(workspace, example);
      const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: adminDatabaseUrl(), NODE_OPTIONS: '' };
      if (ownBroker) delete env.KAFKA_BROKERS;
      else env.KAFKA_BROKERS = kafkaBrokers().join(',');
      const args =
        runner === 'Vitest' ? ['node_modules/vitest/vitest.mjs', 'run'] : runner === 'Jest (ESM)' ? ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js', '--ci'] : ['node_modules/jest/bin/jest.js', '--ci'];
      const began = Date.now();
      const result = spawnSync(runtime.node, args, { cwd: dir, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 300000 });
      const output = `${result.stdout}\n${result.stderr}`;
      const logFile = join(REPO_ROOT, '.test-logs', 'examples', `${example}-${runner.replace(/\W+/g, '-')}-${which}.log`.toLowerCase());
      mkdirSync(dirname(logFile), { recursive: true });
      writeFileSync(logFile, output);
      expect({ status: result.status, tail: result.status === 0 ? '' : output.slice(-4000) }).toEqual({ status: 0, tail: '' });
      // Every test of the file passed (the last proves that one build of the package was loaded).
      expect(output.replace(/\u001b\[[0-9;]*m/g, '')).toMatch(runner === 'Vitest' ? new RegExp(`Tests\\s+${tests} passed \\(${tests}\\)`) : new RegExp(`Tests:\\s+${tests} passed, ${tests} total`));
      // No warning from Node.js or a dependency but Jest's own notice of its ESM mode (Node 24 warned of a negative
      // timeout from KafkaJS while the test's admin client ran before the library had fixed KafkaJS's request queue).
      expect(output.split('\n').filter((line) => /\(node:\d+\) \w*Warning/.test(line) && !/ExperimentalWarning: VM Modules/.test(line))).toEqual([]);
      if (ownBroker) {
        // A broker ran for this run (its log written since), and was stopped at teardown (no pid file left).
        const state = join(tmpdir(), 'kafka-exactly-once-test-28092');
        expect(statSync(join(state, 'data-4.4.0', 'logs', 'server.log')).mtimeMs).toBeGreaterThan(began);
        expect(existsSync(join(state, 'broker.pid'))).toBe(false);
      }
    }, 360000);
  }

  it('warns when one process loads both builds of the package (two sets of injection tokens)', () => {
    const dir = join(workspace, 'nest12-esm');
    const script = join(dir, 'both-builds.mjs');
    writeFileSync(
      script,
      [
        "import { createRequire } from 'node:module';",
        "import { loadedPackageBuilds } from 'kafka-exactly-once/testing';",
        'const before = loadedPackageBuilds();',
        "createRequire(import.meta.url)('kafka-exactly-once');",
        'console.log(JSON.stringify({ before, after: loadedPackageBuilds() }));',
      ].join('\n'),
    );
    const result = spawnSync(process.execPath, [script], { cwd: dir, encoding: 'utf8' });
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout.trim())).toEqual({ before: ['esm'], after: ['esm', 'commonjs'] });
    expect(result.stderr).toMatch(/\[KAFKA_EO_DUAL_PACKAGE\] Warning: kafka-exactly-once is loaded twice in this process/);
  });
});
