'use strict';
/**
 * The verifier's fault scenarios. Each gets a Stage (its own topics, database, group, processes, fault log) and
 * the profile's settings: `count` payments published by the load command at `rate` per second, `faults` faults.
 */
const { spawnSync } = require('child_process');
const { randomBytes, randomUUID } = require('crypto');
const { join } = require('path');
const { checkRetries } = require('./checker');

module.exports = ({ sleep, kafkaScript, sendRaw, avro, ROOT, KAFKA_EO_CLI, log, Proc, PRODUCER_MAIN, readTopic, header }) => {
  /** The welcome emails' retry tiers in the transient-failures scenario: together longer than the gateway's outage. */
  const RETRY_DELAYS = ['1s', '2s', '4s'];

  /** The local broker can be stopped and started only when scripts/kafka started it. */
  const brokerControl = () => spawnSync('bash', [join(ROOT, 'scripts/kafka/kafka.sh'), 'status'], { encoding: 'utf8' }).status === 0;

  const waitExit = (proc, ms) => Promise.race([proc.exited, sleep(ms)]);

  // The nodes of `kafka.sh --nodes 3` (KAFKA_CLUSTER_PORT_BASE moves them, as it moves the script's).
  const base = Number(process.env.KAFKA_CLUSTER_PORT_BASE || 9192);
  const CLUSTER_BROKERS = [0, 1, 2].map((i) => `127.0.0.1:${base + i}`);
  const cluster = (...argv) => {
    const result = spawnSync('bash', [join(ROOT, 'scripts/kafka/kafka.sh'), '--nodes', '3', ...argv], { encoding: 'utf8' });
    if (result.status !== 0 && argv[0] !== 'status') throw new Error(`kafka.sh --nodes 3 ${argv.join(' ')} failed: ${result.stdout}${result.stderr}`);
    return result.status === 0;
  };

  // The local broker's PROXIED listener (kafka.sh), advertised on the port where the network-kafka scenario's
  // fault proxy listens: clients that bootstrap there reach the broker only through the proxy.
  const PROXIED_PORT = Number(process.env.KAFKA_PROXIED_PORT || 9094);
  const PROXY_PORT = Number(process.env.KAFKA_PROXY_PORT || 9095);
  const proxiedListenerUp = () =>
    new Promise((resolve) => {
      const socket = require('net').connect({ host: '127.0.0.1', port: PROXIED_PORT }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });

  /** Latency, resets, a blackhole and a half-open connection through a fault proxy, in turn, while the load flows. */
  const networkFaults = async (stage, cfg, proxy, what) => {
    const faults = [
      ['latency', async () => { proxy.setMode('latency', { ms: 40 }); await sleep(3000); }],
      ['reset', async () => { proxy.setMode('reset'); await sleep(1000); }],
      // A partition ends with the connections reset, as TCP keepalive or the server's idle timeout would.
      ['blackhole', async () => { proxy.setMode('blackhole'); await sleep(3000); proxy.setMode('reset'); await sleep(500); }],
      ['half-open', async () => { proxy.setMode('half-open'); await sleep(3000); proxy.setMode('reset'); await sleep(500); }],
    ];
    const rounds = Math.max(faults.length, cfg.faults);
    for (let f = 0; f < rounds; f++) {
      await stage.someTime(stage.loadTime(1 / (rounds + 1)));
      const [name, apply] = faults[f % faults.length];
      stage.fault(`${what} ${name}`);
      await apply();
      proxy.setMode('pass');
    }
  };


  /** POST of JSON to 127.0.0.1:port; resolves { status, body } or null when no answer came (a killed app). */
  const post = (port, path, body, headers = {}) =>
    new Promise((resolve) => {
      const data = JSON.stringify(body);
      const req = require('http').request(
        { host: '127.0.0.1', port, path, method: 'POST', timeout: 30000, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...headers } },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode, body: text ? JSON.parse(text) : undefined }));
        },
      );
      req.on('error', () => resolve(null));
      req.on('timeout', () => req.destroy());
      req.end(data);
    });
  const getJson = (port, path) =>
    new Promise((resolve) => {
      require('http')
        .get({ host: '127.0.0.1', port, path, timeout: 3000 }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode, body: text ? JSON.parse(text) : undefined }));
        })
        .on('error', () => resolve(null));
    });

  /** producer-app in outbox mode on the stage's database (its relay competes for the stage's outbox). */
  async function startOutboxApp(stage, n) {
    const proc = new Proc(`producer-app#${n}`, PRODUCER_MAIN, [], {
      PAYMENTS_MODE: 'outbox',
      DATABASE_URL: stage.databaseUrl,
      KAFKA_BROKERS: stage.brokers.join(','),
      KAFKA_TOPIC_PREFIX: stage.prefix,
      HTTP_PORT: '0',
      SPOOL_DIR: join(stage.dir, `spool-outbox-${n}`),
    }, join(stage.dir, 'logs', `producer-app-${n}.log`));
    await proc.waitForLog(/listening on http:\/\/127\.0\.0\.1:\d+/);
    proc.port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(proc.output)[1]);
    return proc;
  }

  /** Java's String.hashCode, as Kafka uses it to place a transactional id on a __transaction_state partition. */
  const javaHash = (text) => {
    let h = 0;
    for (let i = 0; i < text.length; i++) h = (Math.imul(31, h) + text.charCodeAt(i)) | 0;
    return h;
  };

  /**
   * The node that leads a partition of a topic, asked of a fresh admin client each time (one whose connection to
   * a node that was just killed is not reused), again while the metadata has none; undefined after `ms`.
   */
  async function leaderOf(kafka, topic, partition, ms = 20000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const admin = kafka.admin();
      const leader = await admin
        .connect()
        .then(() => admin.fetchTopicMetadata({ topics: [topic] }))
        .then(({ topics }) => topics[0]?.partitions.find((p) => p.partitionId === partition)?.leader, () => undefined)
        .finally(() => admin.disconnect().catch(() => undefined));
      if (Number.isInteger(leader) && leader >= 1) return leader;
      if (Date.now() > deadline) return undefined;
      await sleep(500);
    }
  }

  /** The node that is the transaction coordinator of a transactional id: the leader of its __transaction_state partition. */
  async function coordinatorOf(kafka, transactionalId) {
    const admin = kafka.admin();
    const count = await admin
      .connect()
      .then(() => admin.fetchTopicMetadata({ topics: ['__transaction_state'] }))
      .then(({ topics }) => topics[0]?.partitions.length, () => undefined)
      .finally(() => admin.disconnect().catch(() => undefined));
    if (!count) return undefined;
    const hash = javaHash(transactionalId);
    return leaderOf(kafka, '__transaction_state', (hash === -2147483648 ? 0 : Math.abs(hash)) % count);
  }

  /** The three-node cluster's scenarios: its brokers, topics of replication factor 3, the cluster started if need be. */
  const onCluster = {
    brokers: CLUSTER_BROKERS,
    consumerEnv: { DEMO_TOPIC_REPLICATION_FACTOR: '3' },
    catchUpMs: 420000,
    async setup(stage) {
      if (!cluster('status')) {
        cluster('start');
        stage.cleanup.push(() => cluster('stop'));
      }
    },
  };

  /** The Schema Registry of scripts/registry/registry.sh, and its Confluent-compatible base URL. */
  const REGISTRY_URL = `http://127.0.0.1:${process.env.REGISTRY_PORT || 28081}/apis/ccompat/v7`;
  const registryScript = (command) => spawnSync('bash', [join(ROOT, 'scripts/registry/registry.sh'), command], { encoding: 'utf8' });

  /**
   * Another service's producer, in the Schema Registry's framing with the registry's own client (encode), as it
   * would write: `count` payments of `accounts` accounts at `rate` per second, a share sent twice with the same
   * message id, every acknowledged id in the stage's ack log. With `evolve`, a writer deploying a new version
   * while its old instances still run: at a third of the load `evolve()` registers v2 (its id), and from then on
   * each payment is written with v1 or v2 at random (old versions after new ones). Resolves when all are sent.
   */
  const registryLoad = async (stage, cfg, client, id, evolve) => {
    const { appendFileSync } = require('fs');
    const producer = stage.kafka.producer({ idempotent: true, createPartitioner: require('kafkajs').Partitioners.DefaultPartitioner });
    await producer.connect();
    try {
      const sent = [];
      const batch = 30;
      let ids = [id];
      for (let n = 0; n < cfg.count; n += batch) {
        const started = Date.now();
        const messages = [];
        if (evolve && ids.length === 1 && n >= cfg.count / 3) ids = [id, await evolve()];
        for (let i = n; i < Math.min(cfg.count, n + batch); i++) {
          if (sent.length > 0 && stage.random() < cfg.duplicates) {
            messages.push(sent[Math.floor(stage.random() * sent.length)]);
            continue;
          }
          const accountId = `${stage.accountPrefix}${Math.floor(stage.random() * cfg.accounts)}`;
          const amount = Math.floor(stage.random() * 9000) - 3000 || 1;
          const version = ids[Math.floor(stage.random() * ids.length)];
          const payment = { paymentId: randomUUID(), accountId, amountCents: amount, requestedAt: new Date().toISOString() };
          const value = await client.encode(version, version === id ? payment : { ...payment, channel: stage.random() < 0.5 ? 'web' : 'app' });
          const message = { key: accountId, value, headers: { 'message-id': randomUUID() } };
          sent.push(message);
          messages.push(message);
        }
        await producer.send({ topic: stage.topic('payments.requested'), acks: -1, messages });
        appendFileSync(stage.ackLog, messages.map((m) => `${m.headers['message-id']} registry\n`).join(''));
        await sleep(Math.max(0, (batch * 1000) / cfg.rate - (Date.now() - started)));
      }
    } finally {
      await producer.disconnect();
    }
  };

  /**
   * Where the producers of the registry formats plug into the formats scenario: each a function (stage, cfg) that
   * writes `cfg.count` payments of the stage's accounts in a Schema Registry's framing (JSON Schema, Protobuf),
   * with the registry's own serializers as another service would, appends every acknowledged paymentId to
   * `stage.ackLog`, and resolves when all are acknowledged. Their consumers then need SCHEMA_REGISTRY_URL (and
   * the Protobuf handlers `format: 'protobuf'`). None is here yet: the scenario writes through Nest's client only.
   */
  // Payments as two other services write them in a Schema Registry's framing, each with tools of its own and none of
  // the library's: JSON Schema by the registry's own Node client (its encode validates and frames), Protobuf by
  // protobufjs with Confluent's framing written out (00, the id, the message indexes [0] as one 00 byte, the body).
  const PAYMENT_JSON_SCHEMA = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'PaymentRequested',
    type: 'object',
    properties: { paymentId: { type: 'string' }, accountId: { type: 'string' }, amountCents: { type: 'integer' }, requestedAt: { type: 'string' } },
    required: ['paymentId', 'accountId', 'amountCents', 'requestedAt'],
  };
  const PAYMENT_PROTO = `syntax = "proto3";
package com.example;
message PaymentRequested { string paymentId = 1; string accountId = 2; int32 amountCents = 3; string requestedAt = 4; }
`;

  /**
   * Registers the two writers' schemas under the input topic's subject (JSON Schema first, then Protobuf: the
   * subject holds both types, as a topic moving from one to the other does) and gives the stage a decoder of their
   * records for the checker. Resolves to the two loads' producers.
   */
  const registryFormatWriters = async (stage) => {
    const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
    const protobuf = require('protobufjs');
    const client = new SchemaRegistry({ host: REGISTRY_URL });
    const subject = { subject: `${stage.topic('payments.requested')}-value` };
    // Registered over the registry's REST API, as a deploy step does (the client parses a subject's other schemas
    // with its own type's parser when it registers). The subject takes both types only without a compatibility check.
    const rest = async (method, path, body) => {
      const answer = await fetch(`${REGISTRY_URL}${path}`, { method, headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' }, body: JSON.stringify(body) });
      const json = await answer.json();
      if (!answer.ok) throw new Error(`registry ${method} ${path}: ${answer.status} ${JSON.stringify(json)}`);
      return json;
    };
    const versions = `/subjects/${encodeURIComponent(subject.subject)}/versions`;
    const jsonId = (await rest('POST', versions, { schemaType: SchemaType.JSON, schema: JSON.stringify(PAYMENT_JSON_SCHEMA) })).id;
    await rest('PUT', `/config/${encodeURIComponent(subject.subject)}`, { compatibility: 'NONE' });
    const protoId = (await rest('POST', versions, { schemaType: SchemaType.PROTOBUF, schema: PAYMENT_PROTO })).id;
    const Payment = protobuf.parse(PAYMENT_PROTO, { keepCase: true }).root.lookupType('com.example.PaymentRequested');
    const header = (id, ...more) => {
      const h = Buffer.alloc(5);
      h.writeUInt32BE(id, 1);
      return Buffer.concat([h, ...more]);
    };
    stage.framedDecoder = (value) => {
      const id = value.readUInt32BE(1);
      if (id === jsonId) return JSON.parse(value.subarray(5).toString('utf8'));
      if (id === protoId && value[5] === 0) return Payment.toObject(Payment.decode(value.subarray(6)), { defaults: true });
      return null;
    };
    stage.fault(`JSON Schema (id ${jsonId}) and Protobuf (id ${protoId}) of PaymentRequested registered under ${subject.subject}`);
    return [
      { name: 'json-schema', encode: (payment) => client.encode(jsonId, payment) },
      { name: 'protobuf', encode: async (payment) => header(protoId, Buffer.from([0]), Buffer.from(Payment.encode(Payment.fromObject(payment)).finish())) },
    ];
  };

  /** One writer's share of the payments: `count` at `rate` per second, a share sent twice with the same message id. */
  const framedLoad = async (stage, cfg, writer, count, rate) => {
    const { appendFileSync } = require('fs');
    const producer = stage.kafka.producer({ idempotent: true, createPartitioner: require('kafkajs').Partitioners.DefaultPartitioner });
    await producer.connect();
    try {
      const sent = [];
      const batch = 10;
      for (let n = 0; n < count; n += batch) {
        const started = Date.now();
        const messages = [];
        for (let i = n; i < Math.min(count, n + batch); i++) {
          if (sent.length > 0 && stage.random() < cfg.duplicates) {
            messages.push(sent[Math.floor(stage.random() * sent.length)]);
            continue;
          }
          const accountId = `${stage.accountPrefix}${Math.floor(stage.random() * cfg.accounts)}`;
          const amountCents = Math.floor(stage.random() * 9000) - 3000 || 1;
          const payment = { paymentId: randomUUID(), accountId, amountCents, requestedAt: new Date().toISOString() };
          const message = { key: accountId, value: await writer.encode(payment), headers: { 'message-id': randomUUID() } };
          sent.push(message);
          messages.push(message);
        }
        await sendWithRetries(producer, { topic: stage.topic('payments.requested'), acks: -1, messages });
        appendFileSync(stage.ackLog, messages.map((m) => `${m.headers['message-id']} ${writer.name}\n`).join(''));
        await sleep(Math.max(0, (batch * 1000) / rate - (Date.now() - started)));
      }
    } finally {
      await producer.disconnect();
    }
  };

  /** A send tried again while the broker is away (the scenario restarts it), as a producer that must not drop a payment does. */
  const sendWithRetries = async (producer, record) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await producer.send(record);
      } catch (err) {
        if (attempt >= 60) throw err;
        await sleep(1000);
      }
    }
  };

  const registryFormatLoads = async (stage, cfg) => {
    const writers = await registryFormatWriters(stage);
    const share = Math.floor(cfg.count / 5);
    return writers.map((writer) => framedLoad(stage, cfg, writer, share, Math.max(5, cfg.rate / 5)));
  };

  /**
   * The hostile JSON records of the formats scenario: each an otherwise valid payment (so that only what is
   * hostile about it can refuse it), on a key of its own, with the reason its dead letter must carry. Every one
   * parks its key (payments are @OrderedEvent).
   */
  const hostileJson = (stage) => {
    const kinds = [];
    const add = (kind, reason, value) => kinds.push({ kind, reason, key: `hostile-${kind}`, value });
    const payment = (kind, extra = {}) => ({ paymentId: randomUUID(), accountId: `hostile-${kind}`, amountCents: 100, requestedAt: new Date().toISOString(), ...extra });
    const text = (kind, extra) => JSON.stringify(payment(kind, extra));
    // 10 MB: over the module's json.maxBytes (1 MiB); the input topic is created with max.message.bytes 16 MiB.
    add('10mb', 'decode-failed', Buffer.from(text('10mb', { note: 'x'.repeat(10 * 1024 * 1024) })));
    const deep = 100000;
    add('deep', 'decode-failed', Buffer.from(`${text('deep').slice(0, -1)},"nested":${'['.repeat(deep)}${']'.repeat(deep)}}`));
    add('proto', 'decode-failed', Buffer.from(`{"__proto__":{"amountCents":1000000000},${text('proto').slice(1)}`));
    const big = payment('int64');
    add('int64', 'decode-failed', Buffer.from(`{"paymentId":"${big.paymentId}","accountId":"${big.accountId}","amountCents":9223372036854775807,"requestedAt":"${big.requestedAt}"}`));
    add('utf8', 'decode-failed', Buffer.concat([Buffer.from(`${text('utf8').slice(0, -1)},"note":"`), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]));
    add('bom', 'decode-failed', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text('bom'))]));
    add('nul', 'decode-failed', Buffer.concat([Buffer.from([0x00]), Buffer.from(text('nul'))]));
    add('tombstone', 'decode-failed', null);
    add('string-amount', 'validation-failed', Buffer.from(text('string-amount', { amountCents: '100' })));
    const dup = payment('duplicate-keys');
    add('duplicate-keys', 'decode-failed', Buffer.from(`{"paymentId":"${dup.paymentId}","accountId":"${dup.accountId}","amountCents":100,"amountCents":-100000,"requestedAt":"${dup.requestedAt}"}`));
    return kinds.map((k) => ({ ...k, messageId: `hostile-${k.kind}-${randomUUID()}` }));
  };

  /** A stage's input topic, created before any consumer does, with room for a 10 MB record. */
  const createLargeInput = async (stage, partitions = 6) => {
    const { createTopicsAndWait } = require(join(ROOT, 'dist/libs/kafka-exactly-once/kafka-topics.js'));
    await createTopicsAndWait(stage.admin, [{ topic: stage.topic('payments.requested'), numPartitions: partitions, replicationFactor: 1, configEntries: [{ name: 'max.message.bytes', value: String(16 * 1024 * 1024) }] }]);
  };

  return [
    {
      name: 'consumer-kill',
      description: 'three consumers in one group; SIGKILL one at a random moment and start a new one, again and again',
      async run(stage, cfg) {
        for (let i = 0; i < 3; i++) await stage.startConsumer();
        stage.startLoad(cfg.count);
        for (let f = 0; f < cfg.faults; f++) {
          await stage.someTime(stage.loadTime(1 / (cfg.faults + 1)));
          const live = stage.liveConsumers();
          const victim = live[Math.floor(stage.random() * live.length)];
          stage.fault(`SIGKILL ${victim.name}`);
          await victim.kill();
          await stage.startConsumer({}, false);
        }
      },
    },
    {
      name: 'sigterm-scaling',
      description: 'graceful SIGTERM restarts and scaling the group 1 → 3 → 1 under load',
      async run(stage, cfg) {
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        const cycles = Math.max(1, Math.floor(cfg.faults / 2));
        for (let c = 0; c < cycles; c++) {
          await stage.someTime(stage.loadTime(1 / (cycles * 3)));
          stage.fault('scale 1 → 3');
          await stage.startConsumer({}, false);
          await stage.startConsumer({}, false);
          await stage.someTime(stage.loadTime(1 / (cycles * 3)));
          stage.fault('SIGTERM two (3 → 1)');
          const [keep, ...rest] = stage.liveConsumers();
          await Promise.all(rest.map((p) => p.stop()));
          await stage.someTime(stage.loadTime(1 / (cycles * 3)));
          stage.fault('SIGTERM restart of the last one');
          await keep.stop();
          await stage.startConsumer({}, false);
        }
      },
    },
    {
      name: 'commit-points',
      description: 'SIGKILL at each commit point of the unit of work (mid-chunk, after the PostgreSQL commit, before the Kafka commit)',
      async run(stage, cfg) {
        const points = ['mid-chunk', 'after-db-commit', 'before-kafka-commit'];
        const rounds = Math.max(points.length, cfg.faults);
        for (let r = 0; r < rounds; r++) {
          const point = points[r % points.length];
          const n = 2 + Math.floor(stage.random() * 4);
          const proc = await stage.startConsumer({ KAFKA_EO_FAULT: `${point}:${n}` }, false);
          // The first consumer creates the topics (the publisher refuses a topic that does not exist yet).
          if (r === 0) await stage.topicReady('payments.requested');
          // A load of its own per round, so that every armed consumer has records to reach its commit point with.
          stage.startLoad(Math.ceil(cfg.count / rounds));
          await waitExit(proc, 60000);
          if (proc.running) {
            await proc.stop();
            continue;
          }
          stage.fault(`SIGKILL at ${point} #${n}`);
        }
        await stage.startConsumer({}, false);
      },
    },
    {
      name: 'zombie',
      description: 'a consumer frozen with SIGSTOP past its session timeout while another takes over, woken with SIGCONT later',
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        for (let f = 0; f < cfg.faults; f++) {
          await stage.someTime(stage.loadTime(1 / (cfg.faults + 1)));
          const live = stage.liveConsumers();
          const victim = live[Math.floor(stage.random() * live.length)];
          stage.fault(`SIGSTOP ${victim.name}`);
          victim.signal('SIGSTOP');
          await sleep(10000);
          stage.fault(`SIGCONT ${victim.name}`);
          victim.signal('SIGCONT');
        }
      },
    },
    {
      name: 'slow-handler',
      description: 'a consumer blocked past the Kafka transaction timeout between its PostgreSQL and Kafka commits',
      consumerEnv: { KAFKA_TRANSACTION_TIMEOUT_MS: '8000', INBOX_IDLE_IN_TRANSACTION_TIMEOUT_MS: '8000', INBOX_LOCK_TIMEOUT_MS: '3000' },
      async run(stage, cfg) {
        let plain = await stage.startConsumer();
        for (let f = 0; f < cfg.faults; f++) {
          const n = 2 + Math.floor(stage.random() * 4);
          const slow = await stage.startConsumer({ KAFKA_EO_FAULT: `after-db-commit:${n}:delay=11000` });
          // The armed consumer alone in the group for its round, so that it owns the partitions the load writes
          // under any assignor: beside a member that has them, Kafka 4's uniform assignor (KIP-848) may leave it
          // only other topics' partitions, and its fault would never come.
          await plain.stop();
          await slow.waitForLog(/group .*: assigned [^\n]*payments\.requested\[/, 60000);
          // A load of its own per round: the armed consumer must have records to reach its pause with (a fault
          // that never happened is not reported as one: the wait fails the scenario instead).
          stage.startLoad(Math.ceil(cfg.count / cfg.faults));
          await slow.waitForLog(/fault injection: a 11000 ms pause/, 60000);
          stage.fault(`${slow.name} blocked 11 s after its PostgreSQL commit`);
          await sleep(12000);
          await slow.stop();
          plain = await stage.startConsumer();
        }
      },
    },
    {
      name: 'broker-kill',
      description: 'the broker SIGKILLed and restarted under load',
      get optIn() {
        return !brokerControl();
      },
      catchUpMs: 420000,
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        for (let f = 0; f < cfg.faults; f++) {
          await stage.someTime(stage.loadTime(1 / (cfg.faults + 1)));
          stage.fault('broker SIGKILL');
          kafkaScript('kill');
          await sleep(2000);
          kafkaScript('start');
          stage.fault('broker back');
        }
      },
    },
    {
      name: 'postgres-faults',
      description: "the apps' PostgreSQL connections terminated mid-transaction (pg_terminate_backend), and an account row locked past lock_timeout",
      consumerEnv: { INBOX_LOCK_TIMEOUT_MS: '2000' },
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        for (let f = 0; f < cfg.faults * 2; f++) {
          await stage.someTime(stage.loadTime(1 / (cfg.faults * 2 + 1)));
          if (f % 2 === 0) {
            const { rows } = await stage.db.query('SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [stage.database]);
            stage.fault(`pg_terminate_backend of ${rows.length} connections`);
          } else {
            const account = `${stage.accountPrefix}${Math.floor(stage.random() * cfg.accounts)}`;
            stage.fault(`row of ${account} locked for 6 s`);
            await stage.db.query('BEGIN');
            await stage.db.query('INSERT INTO accounts (account_id, balance_cents) VALUES ($1, 0) ON CONFLICT DO NOTHING', [account]);
            await stage.db.query('SELECT 1 FROM accounts WHERE account_id = $1 FOR UPDATE', [account]);
            await sleep(6000);
            await stage.db.query('COMMIT');
          }
        }
      },
    },
    {
      name: 'outbox',
      description: 'payments written through the transactional outbox (producer-app in outbox mode, over HTTP) by many writers, a share rolled back, while the instance holding the relay is SIGKILLed and the broker is killed',
      catchUpMs: 420000,
      async run(stage, cfg) {
        await stage.startConsumer();
        const apps = [await startOutboxApp(stage, 1), await startOutboxApp(stage, 2)];
        stage.cleanup.push(() => Promise.all(apps.map((a) => a.kill())));
        const count = Math.max(200, Math.round(cfg.count / 2));
        const { randomUUID: uuid } = require('crypto');
        const queues = Array.from({ length: cfg.accounts }, () => []);
        for (let i = 0; i < count; i++) {
          const account = i % cfg.accounts;
          queues[account].push({ paymentId: uuid(), accountId: `${stage.accountPrefix}${account}`, amountCents: String(Math.floor(stage.random() * 15000) - 5000), rollBack: stage.random() < 0.05 });
        }
        const committed = new Map();
        const rolledBack = new Set();
        const ackLog = require('fs').openSync(stage.ackLog, 'a');
        let writes = 0;
        let unanswered = 0;
        const interval = 1000 / Math.max(50, cfg.rate / 2);
        const startedAt = Date.now();
        // One writer per account (its next request once the last was answered: the commit order is known), each
        // sending to either instance; a request without an answer is sent again, same paymentId, to the other.
        const writers = queues.map(async (queue, a) => {
          let target = a % apps.length;
          for (const item of queue) {
            for (;;) {
              const slot = startedAt + writes++ * interval;
              if (slot > Date.now()) await sleep(slot - Date.now());
              const answer = apps[target].running ? await post(apps[target].port, '/payments', item, item.rollBack ? { 'x-demo-roll-back': '1' } : {}) : null;
              if (answer && answer.status === 409) {
                rolledBack.add(item.paymentId);
                break;
              }
              if (answer && (answer.status === 201 || answer.status === 200)) {
                if (answer.status === 201) require('fs').writeSync(ackLog, `${answer.body.messageId} committed\n`);
                committed.set(item.paymentId, item.accountId);
                break;
              }
              if (answer) throw new Error(`POST /payments answered ${answer.status} ${JSON.stringify(answer.body)}`);
              unanswered++;
              target = (target + 1) % apps.length;
              await sleep(100);
            }
          }
        });
        const writing = Promise.all(writers);
        let n = apps.length;
        const loadMs = (count / Math.max(50, cfg.rate / 2)) * 1000;
        for (let f = 0; f < cfg.faults; f++) {
          await stage.someTime(loadMs / (cfg.faults + 2));
          // The instance whose relay is active: its SIGKILL leaves a batch open or committed-but-not-cleaned.
          const states = await Promise.all(apps.map(async (app) => (app.running ? (await getJson(app.port, '/health'))?.body?.details?.outbox?.relay : undefined)));
          const victim = Math.max(0, states.indexOf('active'));
          stage.fault(`SIGKILL of producer-app#${apps[victim].name.split('#')[1]} (relay ${states[victim] ?? 'unknown'})`);
          await apps[victim].kill();
          apps[victim] = await startOutboxApp(stage, ++n);
          if (f === 0 && brokerControl()) {
            await stage.someTime(loadMs / (cfg.faults + 2));
            stage.fault('broker SIGKILL');
            kafkaScript('kill');
            await sleep(1000);
            kafkaScript('start');
            stage.fault('broker back');
          }
        }
        await writing;
        require('fs').closeSync(ackLog);
        // Everything committed is relayed: the outbox is empty.
        for (const deadline = Date.now() + 300000; ; await sleep(500)) {
          const { rows } = await stage.db.query('SELECT count(*)::int AS n FROM kafka_eo_outbox');
          if (rows[0].n === 0) break;
          if (Date.now() > deadline) throw new Error(`${rows[0].n} events still in the outbox after 300 s`);
        }
        stage.fault(`${committed.size} committed, ${rolledBack.size} rolled back, ${unanswered} requests without an answer sent again`);
        // The input partitions end with markers (or aborted batches): the group is caught up at their last record.
        const inputs = await readTopic(stage.kafka, stage.topic('payments.requested'), { enough: (rs) => rs.length >= committed.size, idleMs: 2000 });
        stage.dataEnds = new Map();
        for (const r of inputs) stage.dataEnds.set(r.partition, Math.max(stage.dataEnds.get(r.partition) ?? 0, Number(r.offset) + 1));
        stage.outbox = { committed, rolledBack };
      },
      /** Beyond the checker: into Kafka exactly once (both readers), nothing of a rolled-back request, each account in commit order. */
      async after(stage) {
        const schema = avro.loadSchemas(join(ROOT, 'schemas')).get('com.example.PaymentRequested');
        const topic = stage.topic('payments.requested');
        const kafkajs = (await readTopic(stage.kafka, topic, { enough: (rs) => rs.length >= stage.outbox.committed.size, idleMs: 2000 })).map((r) => ({ partition: r.partition, offset: r.offset, payment: avro.decode(schema, r.value) }));
        const { readCommitted } = require('./java-reader');
        const java = (await readCommitted({ brokers: stage.brokers, topics: [topic] })).map((r) => ({ partition: r.partition, offset: String(r.offset), payment: avro.decode(schema, r.value) }));
        for (const [reader, records] of [['KafkaJS', kafkajs], ['Java', java]]) {
          const ids = records.map((r) => r.payment.paymentId);
          const seen = new Set(ids);
          const duplicates = ids.length - seen.size;
          const lost = [...stage.outbox.committed.keys()].filter((id) => !seen.has(id)).length;
          const rolledBack = [...stage.outbox.rolledBack].filter((id) => seen.has(id)).length;
          const unexpected = ids.filter((id) => !stage.outbox.committed.has(id)).length;
          let disorder = 0;
          const byAccount = new Map();
          for (const [id, account] of stage.outbox.committed) byAccount.set(account, [...(byAccount.get(account) ?? []), id]);
          const sorted = [...records].sort((a, b) => a.partition - b.partition || (BigInt(a.offset) < BigInt(b.offset) ? -1 : 1));
          for (const [account, want] of byAccount) {
            const got = sorted.filter((r) => r.payment.accountId === account).map((r) => r.payment.paymentId);
            want.forEach((id, i) => {
              if (got[i] !== id) disorder++;
            });
          }
          log(`  outbox (${reader} read committed): ${seen.size} events for ${stage.outbox.committed.size} committed requests; ${lost} lost, ${duplicates} duplicates, ${rolledBack} of rolled-back requests, ${unexpected} unexpected, ${disorder} out of commit order`);
          if (lost || duplicates || rolledBack || unexpected || disorder) throw new Error(`outbox: ${reader} reader found ${lost} lost, ${duplicates} duplicates, ${rolledBack} of rolled-back requests, ${unexpected} unexpected, ${disorder} out of commit order`);
        }
      },
    },
    {
      name: 'outage-producer-kill',
      description: 'the broker killed while the load publishes (the publisher spools), the load SIGKILLed during the outage, a new load drains the spool',
      get optIn() {
        return !brokerControl();
      },
      catchUpMs: 420000,
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        const rounds = Math.max(1, Math.floor(cfg.faults / 2));
        for (let r = 0; r < rounds; r++) {
          const load = stage.startLoad(Math.ceil(cfg.count / rounds));
          await stage.someTime(stage.loadTime(0.4 / rounds));
          // SIGKILL, not a graceful stop: Kafka 4.4's controlled shutdown can record a transaction as committed
          // without writing its markers, which leaves it hanging until an operator aborts it (docs/operations.md §8).
          stage.fault('broker killed');
          kafkaScript('kill');
          await sleep(1500);
          stage.fault('load SIGKILL during the outage');
          load.killedOnPurpose = true;
          await load.kill();
          await sleep(2000);
          kafkaScript('start');
          stage.fault('broker back');
          await (await stage.startLoad(1)).exited; // drains what the killed one spooled
        }
      },
    },
    {
      name: 'network-postgres',
      description: 'the consumers reach PostgreSQL through a TCP fault proxy: latency, connection resets, a blackhole and a half-open connection during commits',
      async run(stage, cfg) {
        const { createFaultProxy } = require('./fault-proxy');
        const target = new URL(stage.databaseUrl);
        const proxy = await createFaultProxy({ listenPort: 0, targetHost: target.hostname, targetPort: Number(target.port || 5432) });
        stage.cleanup.push(() => proxy.close());
        const viaProxy = new URL(stage.databaseUrl);
        viaProxy.port = String(proxy.port);
        const env = { DATABASE_URL: viaProxy.toString() };
        await stage.startConsumer(env);
        await stage.startConsumer(env);
        stage.startLoad(cfg.count);
        await networkFaults(stage, cfg, proxy, 'PostgreSQL');
      },
    },
    {
      name: 'network-kafka',
      description: 'the apps reach Kafka through a TCP fault proxy (every connection, metadata included): latency, connection resets, a blackhole and a half-open connection during commits',
      brokers: [`127.0.0.1:${PROXY_PORT}`],
      async setup(stage) {
        if (!(await proxiedListenerUp())) {
          throw new Error(`the broker has no PROXIED listener on 127.0.0.1:${PROXIED_PORT}: restart it with scripts/kafka/kafka.sh restart (the listener came with the network-kafka scenario)`);
        }
        const { createFaultProxy } = require('./fault-proxy');
        stage.kafkaProxy = await createFaultProxy({ listenPort: PROXY_PORT, targetHost: '127.0.0.1', targetPort: PROXIED_PORT });
        stage.cleanup.push(() => stage.kafkaProxy.close());
      },
      async run(stage, cfg) {
        const proxy = stage.kafkaProxy;
        await stage.startConsumer();
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        await networkFaults(stage, cfg, proxy, 'Kafka');
      },
    },
    {
      name: 'cluster',
      description: 'a three-node cluster (RF 3, min ISR 2): SIGKILL the leader of an input partition, then of a transaction coordinator, under load; a rolling restart',
      ...onCluster,
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        const input = stage.topic('payments.requested');
        stage.startLoad(cfg.count * 2);
        const rounds = Math.max(1, Math.floor(cfg.faults / 2));
        for (let r = 0; r < rounds; r++) {
          await stage.someTime(stage.loadTime(0.3 / rounds));
          const partition = Math.floor(stage.random() * 6);
          const leader = (await leaderOf(stage.kafka, input, partition)) ?? 1 + Math.floor(stage.random() * 3);
          stage.fault(`SIGKILL node ${leader} (leader of ${input}[${partition}])`);
          cluster('kill-node', String(leader));
          await sleep(3000);
          cluster('start-node', String(leader));
          stage.fault(`node ${leader} back`);
          // The library's id of the partition's producer: prefix and group escaped (transactional-ids.ts).
          const txnId = `consumer-app.${stage.group.replace(/%/g, '%25').replace(/\./g, '%2E')}.${input}.${partition}`;
          const found = await coordinatorOf(stage.kafka, txnId);
          // When the metadata does not tell (it has none for a while after a node came back), another node dies instead.
          const coordinator = found ?? 1 + ((leader + Math.floor(stage.random() * 2)) % 3);
          stage.fault(`SIGKILL node ${coordinator} (${found ? 'transaction coordinator' : 'coordinator unknown; a node other than the last'} of ${input}[${partition}])`);
          cluster('kill-node', String(coordinator));
          await sleep(3000);
          cluster('start-node', String(coordinator));
          stage.fault(`node ${coordinator} back`);
        }
        stage.fault('rolling restart');
        cluster('rolling-restart');
        stage.fault('rolling restart done');
      },
    },
    {
      name: 'leader-move',
      description: 'a three-node cluster (RF 3, min ISR 2): partition leaders of the input, output and dead-letter topics moved every 3 s under load (replica order rotated, then a preferred leader election), as Kafka\'s auto leader rebalance and operators do',
      ...onCluster,
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        const { leaderMoves } = require('../kafka/leader-moves');
        const topics = ['payments.requested', 'payments.processed', 'payments.requested.dlq'].map((t) => stage.topic(t));
        const mover = leaderMoves({ brokers: CLUSTER_BROKERS, topics, intervalMs: 3000, random: stage.random, log: (line) => stage.fault(line.split(stage.prefix).join('')) });
        const load = stage.startLoad(cfg.count * 2);
        mover.start();
        try {
          await load.exited;
        } finally {
          const moves = await mover.stop();
          stage.fault(`${moves.moved} leader moves in ${moves.rounds} rounds${moves.errors ? `, ${moves.errors} failed (${moves.lastError})` : ''}`);
          if (moves.moved === 0) throw new Error(`no partition leader moved (${moves.lastError ?? 'no error'})`);
        }
      },
    },
    {
      name: 'transient-failures',
      description: "welcome emails through a mail gateway down for every second user for 6 s, retried through retry topics while payments flow; a consumer SIGKILLed while emails wait on the tiers; addresses that always bounce end dead-lettered",
      consumerEnv: { WELCOME_EMAIL_RETRY_DELAYS: RETRY_DELAYS.join(',') },
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        const users = Math.min(400, Math.max(100, Math.round(cfg.count / 10)));
        const schemas = avro.loadSchemas(join(ROOT, 'schemas'));
        const signedUp = schemas.get('com.example.UserSignedUp');
        const email = (id) => (id % 37 === 5 ? `user-${id}@bounce.invalid` : `user-${id}@example.com`);
        const signups = Array.from({ length: users }, (_, i) => i + 1).map((id) => ({
          key: `user-${id}`,
          value: avro.encode(signedUp, { userId: id, userEmail: email(id), timestamp: new Date().toISOString() }),
          headers: { 'message-id': `signup-${id}-${randomUUID()}` },
        }));
        await stage.db.query(`INSERT INTO demo_mailer_outages (down_until, every_nth_user) VALUES (now() + interval '6 seconds', 2)`);
        stage.fault('mail gateway down for every second user for 6 s');
        for (let i = 0; i < signups.length; i += 50) await sendRaw(stage, signups.slice(i, i + 50), 'users.signed-up');
        stage.fault(`${users} sign-ups published`);
        stage.signups = users;
        const deadline = Date.now() + 30000;
        while ((await stage.db.query(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE consumer_group = $1 AND status = 'retrying'`, [stage.group])).rows[0].n < 5 && Date.now() < deadline) await sleep(200);
        const live = stage.liveConsumers();
        const victim = live[Math.floor(stage.random() * live.length)];
        stage.fault(`SIGKILL ${victim.name} while emails wait on the retry topics`);
        await victim.kill();
        await stage.startConsumer({}, false);
      },
      async after(stage) {
        // The last tier of an email that failed at the end of the outage is due some 7 s later.
        const deadline = Date.now() + 120000;
        for (;;) {
          const { rows } = await stage.db.query(
            `SELECT (SELECT count(*)::int FROM kafka_eo_inbox WHERE consumer_group = $1 AND status = 'retrying') AS waiting, (SELECT count(DISTINCT message_id)::int FROM welcome_emails_sent) AS sent`,
            [stage.group],
          );
          if (rows[0].waiting === 0 && rows[0].sent >= stage.signups - Math.ceil(stage.signups / 37)) break;
          if (Date.now() > deadline) throw new Error(`welcome emails did not settle within 120 s (${rows[0].waiting} waiting on retry topics, ${rows[0].sent} sent)`);
          await sleep(500);
        }
      },
      async check(stage) {
        const welcome = stage.topic('notifications.welcome-email');
        const requestedSchema = avro.loadSchemas(join(ROOT, 'schemas')).get('com.example.WelcomeEmailRequested');
        const requested = (await readTopic(stage.kafka, welcome, { enough: (rs) => rs.length >= stage.signups, idleMs: 500, timeoutMs: 60000 })).map((r) => {
          const event = avro.decode(requestedSchema, r.value);
          return { messageId: header(r.headers, 'message-id'), userId: event?.userId, email: event?.email ?? '' };
        });
        const all = (headers, name) => [].concat(headers?.[name] ?? []);
        const deadLetters = (await readTopic(stage.kafka, `${welcome}.dlq`, { idleMs: 1000, timeoutMs: 30000 })).map((r) => ({ messageId: header(r.headers, 'message-id'), stages: all(r.headers, 'retry-history').length }));
        const tierRecords = [];
        for (let n = 1; n <= RETRY_DELAYS.length; n++) {
          const topic = `${welcome}.retry.${n}`;
          for (const r of await readTopic(stage.kafka, topic, { idleMs: 500, timeoutMs: 30000 })) tierRecords.push({ topic, messageId: header(r.headers, 'message-id') });
        }
        const sent = (await stage.db.query('SELECT message_id, user_id FROM welcome_emails_sent')).rows.map((r) => ({ messageId: r.message_id, userId: r.user_id }));
        // The gateway's own record of every call it got (its table, written outside the consumer's transactions).
        const gatewayCalls = (await stage.db.query('SELECT user_id, calls, failed FROM demo_mailer_calls')).rows.map((r) => ({ userId: r.user_id, calls: r.calls, failed: r.failed }));
        return checkRetries({ requested, sent, deadLetters, tierRecords, gatewayCalls, signups: stage.signups, tiers: RETRY_DELAYS.length, bounces: (e) => e.endsWith('@bounce.invalid') });
      },
    },
    {
      name: 'schema-registry',
      description:
        "payments another service writes in the Schema Registry's framing with the registry's own client, outputs in it too (read back by that client); v2 of the record registered mid-run and both versions written interleaved; a consumer SIGKILLed, then the registry killed and a fresh consumer started while it is away",
      consumerEnv: { SCHEMA_REGISTRY_URL: REGISTRY_URL, WIRE_FORMAT: 'schema-registry' },
      async run(stage, cfg) {
        const alreadyUp = registryScript('status').status === 0;
        if (!alreadyUp) {
          const started = registryScript('start');
          if (started.status !== 0) throw new Error(`scripts/registry/registry.sh start failed: ${started.stdout}${started.stderr}`);
          stage.cleanup.push(() => registryScript('stop'));
        }
        const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
        stage.registry = new SchemaRegistry({ host: REGISTRY_URL });
        const schema = (file) => JSON.stringify(JSON.parse(require('fs').readFileSync(join(ROOT, 'schemas', file), 'utf8')));
        const { id } = await stage.registry.register({ type: SchemaType.AVRO, schema: schema('payment-requested.v1.avsc') }, { subject: `${stage.topic('payments.requested')}-value` });
        // The outputs' schemas registered at deploy time (the library does not register at run time by default).
        for (const [topic, name] of [['payments.processed', 'com.example.PaymentProcessed'], ['notifications.welcome-email', 'com.example.WelcomeEmailRequested']]) {
          const registered = spawnSync(process.execPath, [KAFKA_EO_CLI, 'schemas', 'register', '--topic', stage.topic(topic), '--schema', name, '--schemas-dir', join(ROOT, 'schemas'), '--registry', REGISTRY_URL], { encoding: 'utf8' });
          if (registered.status !== 0) throw new Error(`kafka-eo schemas register ${name} exited ${registered.status}: ${registered.stderr}${registered.stdout}`);
        }
        await stage.startConsumer();
        await stage.startConsumer();
        // v2 of the record (a field added with a default) registered while the consumers run; the consumers' reader
        // is still v1, and every record of either version must be handled once, in order, with nothing stalled.
        const v2 = { ...JSON.parse(schema('payment-requested.v1.avsc')) };
        v2.fields = [...v2.fields, { name: 'channel', type: 'string', default: 'unknown' }];
        let v2Registered;
        const evolved = new Promise((resolve) => (v2Registered = resolve));
        const evolve = async () => {
          const registered = await stage.registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(v2) }, { subject: `${stage.topic('payments.requested')}-value` });
          stage.fault(`v2 of PaymentRequested registered (id ${registered.id}): v1 and v2 written interleaved from now on`);
          v2Registered();
          return registered.id;
        };
        const load = registryLoad(stage, cfg, stage.registry, id, evolve);
        // A failure of the load is reported by `await load` below; without a handler now, it would end the process first.
        load.catch(() => {});
        await stage.someTime(stage.loadTime(0.3));
        const live = stage.liveConsumers();
        const victim = live[Math.floor(stage.random() * live.length)];
        stage.fault(`SIGKILL ${victim.name}`);
        await victim.kill();
        if (alreadyUp) {
          stage.fault('registry not started by scripts/registry/registry.sh here: its outage is skipped');
          await stage.startConsumer({}, false);
        } else {
          await stage.someTime(stage.loadTime(0.2));
          // The writer registers v2 before the registry is taken away (registration is a deploy step: a writer
          // that cannot register cannot write v2 at all), however slowly the load runs on this machine.
          await Promise.race([evolved, load]);
          registryScript('kill');
          stage.fault('Schema Registry killed (SIGKILL)');
          // A fresh consumer has no schema cached: its partitions wait for the registry, nothing dead-lettered.
          await stage.startConsumer({}, false);
          stage.fault('a fresh consumer started while the registry is away');
          await sleep(5000);
          const restarted = registryScript('start');
          if (restarted.status !== 0) throw new Error(`the registry did not start again: ${restarted.stdout}${restarted.stderr}`);
          stage.fault('Schema Registry started again (its storage kept)');
        }
        await load;
      },
      async check(stage) {
        // The outputs are in the registry's framing, under the ids registered for their subjects: read with the
        // registry's own client (the checker decodes them so too, but would also take single-object ones).
        const problems = [];
        const processed = stage.topic('payments.processed');
        const latest = await stage.registry.getLatestSchemaId(`${processed}-value`);
        const outputs = await readTopic(stage.kafka, processed, { idleMs: 1000, timeoutMs: 60000 });
        let framed = 0;
        for (const r of outputs) {
          if (!r.value || r.value[0] !== 0 || r.value.length < 5) {
            problems.push(`${processed}[${r.partition}]@${r.offset} is not in the Schema Registry's framing`);
            continue;
          }
          if (r.value.readInt32BE(1) !== latest) problems.push(`${processed}[${r.partition}]@${r.offset} has schema id ${r.value.readInt32BE(1)}, not ${latest} (registered for ${processed}-value)`);
          else framed++;
        }
        if (outputs.length === 0) problems.push(`no outputs on ${processed}`);
        return { outputs: outputs.length, framed, schemaId: latest, problems };
      },
    },
    {
      name: 'formats',
      description:
        "consumers reading JSON (EVENT_FORMAT=json); payments written without message ids by a Nest application's stock ClientKafka (emit), and in a Schema Registry's framing by a JSON Schema writer (the registry's own client) and a Protobuf writer (protobufjs), all on one topic; hostile JSON records mixed in (10 MB, 100,000 deep, __proto__, 2^63-1, invalid UTF-8, a BOM, a leading 00, a tombstone, a string amount, duplicate keys); a consumer SIGKILLed and the broker restarted under load",
      consumerEnv: { EVENT_FORMAT: 'json', SCHEMA_REGISTRY_URL: REGISTRY_URL },
      catchUpMs: 240000,
      async run(stage, cfg) {
        if (registryScript('status').status !== 0) {
          const started = registryScript('start');
          if (started.status !== 0) throw new Error(`scripts/registry/registry.sh start failed: ${started.stdout}${started.stderr}`);
          stage.cleanup.push(() => registryScript('stop'));
        }
        await createLargeInput(stage);
        await stage.startConsumer();
        await stage.startConsumer();
        const nest = new Proc('nest-producer', join(__dirname, 'nest-producer.js'), [], {
          KAFKA_BROKERS: stage.brokers.join(','),
          NEST_TOPIC: stage.topic('payments.requested'),
          NEST_COUNT: String(cfg.count),
          NEST_ACCOUNTS: String(cfg.accounts),
          NEST_ACCOUNT_PREFIX: stage.accountPrefix,
          NEST_RATE: String(cfg.rate),
          NEST_DUPLICATES: String(cfg.duplicates),
          NEST_SEED: String(Math.floor(stage.random() * 2 ** 31)),
          NEST_ACK_LOG: stage.ackLog,
          KAFKAJS_NO_PARTITIONER_WARNING: '1',
        }, join(stage.dir, 'logs', 'nest-producer.log'));
        stage.loads.push(nest);
        const others = await registryFormatLoads(stage, cfg);
        others.forEach((load) => load.catch(() => {})); // awaited below; a failure then fails the scenario

        await stage.someTime(stage.loadTime(0.25));
        const live = stage.liveConsumers();
        const victim = live[Math.floor(stage.random() * live.length)];
        stage.fault(`SIGKILL ${victim.name}`);
        await victim.kill();
        await stage.startConsumer({}, false);

        const hostile = hostileJson(stage);
        for (const h of hostile) {
          stage.planted.set(h.messageId, h.reason);
          stage.expectedParkedKeys.push(h.key);
        }
        stage.hostile = hostile;
        for (const h of hostile) await sendRaw(stage, [{ key: h.key, value: h.value, headers: { 'message-id': h.messageId } }]);
        stage.fault(`${hostile.length} hostile JSON records`);

        await stage.someTime(stage.loadTime(0.2));
        if (brokerControl()) {
          stage.fault('broker SIGKILL');
          kafkaScript('kill');
          await sleep(2000);
          kafkaScript('start');
          stage.fault('broker back');
        } else stage.fault('broker not started by scripts/kafka here: its restart is skipped');
        await Promise.all(others);
      },
      async check(stage) {
        // Each hostile record's dead letter, by the message id it was given, and the reason it carries.
        const letters = await readTopic(stage.kafka, `${stage.topic('payments.requested')}.dlq`, { idleMs: 1000, timeoutMs: 30000 });
        const reasons = new Map();
        for (const r of letters) reasons.set(header(r.headers, 'message-id'), [...(reasons.get(header(r.headers, 'message-id')) ?? []), header(r.headers, 'dlq-reason')]);
        const hostile = (stage.hostile ?? []).map((h) => ({ kind: h.kind, expected: h.reason, found: (reasons.get(h.messageId) ?? []).join(',') || 'none' }));
        const problems = hostile.filter((h) => h.found !== h.expected).map((h) => `hostile ${h.kind}: dead letter ${h.found}, expected ${h.expected}`);
        // The Nest service's payments carry no message id: each is found by its paymentId, in the ledger.
        const acked = new Set(require('fs').readFileSync(stage.ackLog, 'utf8').split('\n').filter((l) => l.endsWith(' nest')).map((l) => l.split(' ')[0]));
        const { rows } = await stage.db.query('SELECT payment_id::text AS id FROM ledger_entries WHERE payment_id = ANY($1::uuid[])', [[...acked]]);
        if (rows.length !== acked.size) problems.push(`${acked.size - rows.length} of ${acked.size} payments the Nest service had acknowledged are not in the ledger`);
        return { hostile, nestAcknowledged: acked.size, nestApplied: rows.length, problems };
      },
    },
    {
      name: 'hostile-json',
      description:
        "consumers reading JSON (EVENT_FORMAT=json) with a forgotten await in the payments handler (STRAY_STATEMENTS_PERCENT=10: a statement through ctx.db 0 to 50 ms after the call, half failing reads, half writes); the JSON reader's worst cases mixed into the load (about 1 MB each: numbers of a million digits, escapes, many keys, long keys, deep branches, invalid bytes last) and the formats scenario's hostile records; a consumer SIGKILLed under load",
      consumerEnv: { EVENT_FORMAT: 'json', STRAY_STATEMENTS_PERCENT: '10' },
      loadEnv: { EVENT_FORMAT: 'json' },
      async run(stage, cfg) {
        await createLargeInput(stage);
        await stage.startConsumer();
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        await stage.someTime(stage.loadTime(0.2));
        // Each parks its key (payments are @OrderedEvent); the reason is the reader's (decode-failed) or the DTO's
        // (validation-failed: a value the reader accepts is no payment), either is right.
        const { JSON_WORST_CASES } = require(join(ROOT, 'bench/json-worst-cases.js'));
        const worst = JSON_WORST_CASES.map((c) => ({ kind: `worst-${c.name}`, reason: '*', key: `hostile-json-${c.name}`, value: c.make(1_000_000), messageId: `hostile-json-${c.name}-${randomUUID()}` }));
        const hostile = [...worst, ...hostileJson(stage)];
        for (const h of hostile) {
          stage.planted.set(h.messageId, h.reason);
          stage.expectedParkedKeys.push(h.key);
        }
        stage.hostile = hostile;
        for (const h of hostile) await sendRaw(stage, [{ key: h.key, value: h.value, headers: { 'message-id': h.messageId } }]);
        stage.fault(`${worst.length} worst-case JSON values (1 MB each) and ${hostile.length - worst.length} hostile JSON records`);
        await stage.someTime(stage.loadTime(0.3));
        const live = stage.liveConsumers();
        const victim = live[Math.floor(stage.random() * live.length)];
        stage.fault(`SIGKILL ${victim.name}`);
        await victim.kill();
        await stage.startConsumer({}, false);
      },
      async check(stage) {
        const problems = [];
        const letters = await readTopic(stage.kafka, `${stage.topic('payments.requested')}.dlq`, { idleMs: 1000, timeoutMs: 30000 });
        const reasons = new Map();
        for (const r of letters) reasons.set(header(r.headers, 'message-id'), [...(reasons.get(header(r.headers, 'message-id')) ?? []), header(r.headers, 'dlq-reason')]);
        const hostile = (stage.hostile ?? []).map((h) => ({ kind: h.kind, expected: h.reason === '*' ? 'decode-failed or validation-failed' : h.reason, found: (reasons.get(h.messageId) ?? []).join(',') || 'none' }));
        for (const [i, h] of (stage.hostile ?? []).entries()) {
          const found = reasons.get(h.messageId) ?? [];
          if (found.length !== 1) problems.push(`hostile ${h.kind}: ${found.length} dead letters`);
          else if (h.reason === '*' ? !['decode-failed', 'validation-failed'].includes(found[0]) : found[0] !== h.reason) problems.push(`hostile ${h.kind}: dead letter ${found[0]}, expected ${hostile[i].expected}`);
        }
        // What became of each stray statement, as consumer-app logged it; a stray user row is one that ran.
        const { readdirSync } = require('fs');
        const logs = readdirSync(join(stage.dir, 'logs')).filter((f) => f.startsWith('consumer-app-')).map((f) => require('fs').readFileSync(join(stage.dir, 'logs', f), 'utf8'));
        const count = (pattern) => logs.reduce((n, text) => n + (text.match(pattern) ?? []).length, 0);
        const strays = { refused: count(/stray statement after the call \([^)]*\): refused/g), ran: count(/stray statement after the call \([^)]*\): ran/g) };
        if (strays.ran > 0) problems.push(`${strays.ran} stray statements sent after the handler's call ran`);
        if (strays.refused === 0) problems.push('no stray statement was sent (STRAY_STATEMENTS_PERCENT not in force?)');
        const { rows } = await stage.db.query(`SELECT count(*)::int AS n FROM users WHERE email LIKE 'stray-%'`);
        if (rows[0].n > 0) problems.push(`${rows[0].n} users written by stray statements`);
        return { hostile, strays, problems };
      },
    },
    {
      name: 'hostile-parking',
      description: 'hostile records mixed into the load (dead-lettered, their keys parked), and an account parked by a failing payment, released with kafka-eo during the run',
      async run(stage, cfg) {
        await stage.startConsumer();
        await stage.startConsumer();
        stage.startLoad(cfg.count);
        const schemas = avro.loadSchemas(join(ROOT, 'schemas'));
        const requested = schemas.get('com.example.PaymentRequested');
        const payment = (accountId, amountCents, paymentId = randomUUID()) => avro.encode(requested, { paymentId, accountId, amountCents, requestedAt: new Date().toISOString() });
        await stage.someTime(stage.loadTime(0.2));
        const hostile = [];
        for (let i = 0; i < 3; i++) {
          const add = (kind, reason, key, value, parks) => {
            const messageId = `hostile-${kind}-${i}-${randomUUID()}`;
            hostile.push({ key, value, headers: { 'message-id': messageId } });
            stage.planted.set(messageId, reason);
            if (parks) stage.expectedParkedKeys.push(key);
          };
          add('garbage', 'decode-failed', `hostile-garbage-${i}`, randomBytes(40), true);
          add('schema', 'unknown-schema', `hostile-schema-${i}`, Buffer.concat([Buffer.from([0xc3, 0x01]), randomBytes(8), Buffer.from('body')]), true);
          add('blank', 'key-unresolved', `hostile-blank-${i}`, payment('   ', 100n), false);
          add('uuid', 'handler-failed', `hostile-uuid-${i}`, payment(`hostile-uuid-${i}`, 100n, `not-a-uuid-${i}`), true);
        }
        await sendRaw(stage, hostile);
        stage.fault(`${hostile.length} hostile records`);
        // An account whose deposit needs an approval: parked, its later payments wait, released after the approval.
        const vip = `${stage.accountPrefix}vip`;
        const big = randomUUID();
        const amounts = [1000n, 2000000n, -900000n, 50n, -900000n];
        const special = amounts.map((amount, i) => ({ key: vip, value: payment(vip, amount, i === 1 ? big : randomUUID()), headers: { 'message-id': `vip-${i}-${randomUUID()}` } }));
        special.slice(1).forEach((m) => stage.released.add(m.headers['message-id']));
        await sendRaw(stage, special);
        const deadline = Date.now() + 120000;
        while ((await stage.db.query('SELECT count(*)::int AS n FROM kafka_eo_parked_records WHERE consumer_group = $1 AND key_digest = sha256(convert_to($2, $3))', [stage.group, vip, 'UTF8'])).rows[0].n < 4) {
          if (Date.now() > deadline) throw new Error(`${vip} was not parked with its 4 payments within 120 s`);
          await sleep(300);
        }
        stage.fault(`${vip} parked`);
        await stage.db.query(`INSERT INTO payment_approvals (payment_id, approved_by) VALUES ($1, 'verify')`, [big]);
        const release = spawnSync(process.execPath, [KAFKA_EO_CLI, 'parked', 'release', stage.topic('payments.requested'), vip, '--group', stage.group, '--json', '--actor', 'verify'], {
          encoding: 'utf8',
          env: { ...process.env, DATABASE_URL: stage.databaseUrl, KAFKA_BROKERS: stage.brokers.join(',') },
        });
        if (release.status !== 0) throw new Error(`kafka-eo parked release exited ${release.status}: ${release.stderr}${release.stdout}`);
        stage.fault(`${vip} released by kafka-eo (${JSON.parse(release.stdout).result.replayed} replayed)`);
      },
    },
  ];
};
