#!/usr/bin/env node
'use strict';
/**
 * Moves partition leadership on a multi-node cluster the way Kafka does by itself (auto.leader.rebalance.enable,
 * every 5 minutes by default) and operators do with a reassignment: rotate a partition's replica order (the
 * same replicas, so nothing is copied), then a preferred leader election, so that the new first replica leads.
 * Clients see NOT_LEADER_OR_FOLLOWER for requests in flight, and metadata in which the partition's leader is
 * now another broker: the routine life of a production cluster. For the fault scenarios of scripts/verify and
 * the suites that send across brokers (test/library.leader-move). Imports only kafkajs (its cluster and
 * connections for ElectLeaders, which its admin client lacks).
 *
 * API
 *   const mover = leaderMoves({ brokers: ['127.0.0.1:9192', ...], topics: ['a', 'b'], intervalMs: 3000 })
 *   await mover.moveOnce()   -> number of partitions whose leader was moved
 *   mover.start()            moves a random half of the topics' partitions every intervalMs, until stop()
 *   await mover.stop()       -> { rounds, moved, errors }
 *
 * CLI
 *   node scripts/kafka/leader-moves.js --brokers h:p[,h:p] [--interval-ms 3000] [--duration-ms 60000] topic...
 */
const { Kafka, logLevel } = require('kafkajs');
const Encoder = require('kafkajs/src/protocol/encoder');
const Decoder = require('kafkajs/src/protocol/decoder');

const ELECT_LEADERS = 43;
const PREFERRED = 0;
const ELECTION_NOT_NEEDED = 84;

function symbolOf(target, description) {
  const owners = [target, Object.getPrototypeOf(target)];
  for (const owner of owners) {
    const found = Object.getOwnPropertySymbols(owner).find((s) => s.description === description);
    if (found) return found;
  }
  throw new Error(`kafkajs internals changed (${description} not found)`);
}

/** ElectLeaders v1 (KIP-460): a preferred election for the given partitions. */
function electLeadersV1(partitionsByTopic, timeoutMs) {
  return {
    request: {
      apiKey: ELECT_LEADERS,
      apiVersion: 1,
      apiName: 'ElectLeaders',
      encode: async () => {
        const topics = [...partitionsByTopic].map(([topic, partitions]) => new Encoder().writeString(topic).writeArray(partitions, 'int32'));
        return new Encoder().writeInt8(PREFERRED).writeArray(topics, 'object').writeInt32(timeoutMs);
      },
    },
    response: {
      decode: async (payload) => {
        const decoder = new Decoder(payload);
        decoder.readInt32(); // throttle time
        const errorCode = decoder.readInt16();
        const results = decoder.readArray((t) => {
          const topic = t.readString();
          const partitions = t.readArray((p) => ({ partition: p.readInt32(), errorCode: p.readInt16(), message: p.readString() }));
          return partitions.map((p) => ({ topic, ...p }));
        });
        return { errorCode, results: results.flat() };
      },
      parse: async (data) => data,
    },
  };
}

function leaderMoves({ brokers, topics, intervalMs = 3000, fraction = 0.5, random = Math.random, log = () => undefined }) {
  const kafka = new Kafka({ clientId: 'leader-moves', brokers, logLevel: logLevel.NOTHING, retry: { retries: 3 } });
  const admin = kafka.admin();
  const cluster = kafka[symbolOf(kafka, 'private:Kafka:createCluster')]({ allowAutoTopicCreation: false });
  let connected;
  const stats = { rounds: 0, moved: 0, errors: 0, lastError: undefined };
  let timer;
  let running;
  let stopping = false;

  const connect = () => (connected ??= Promise.all([admin.connect(), cluster.connect()]).catch((err) => {
    connected = undefined;
    throw err;
  }));

  /** Rotates the replica order of some partitions, then elects the preferred leader: each moves to another broker. */
  async function moveOnce(share = fraction) {
    await connect();
    const metadata = await admin.fetchTopicMetadata({ topics });
    const chosen = new Map();
    const reassign = [];
    for (const { name, partitions } of metadata.topics) {
      const moving = partitions.filter((p) => p.replicas.length > 1 && random() < share);
      if (moving.length === 0) continue;
      chosen.set(name, moving.map((p) => p.partitionId));
      reassign.push({
        topic: name,
        partitionAssignment: moving.map((p) => {
          // A random other replica goes first (the preferred leader), the current leader last.
          const others = p.replicas.filter((r) => r !== p.leader);
          const next = others.splice(Math.floor(random() * others.length), 1);
          return { partition: p.partitionId, replicas: [...next, ...others, p.leader] };
        }),
      });
    }
    if (reassign.length === 0) return 0;
    await admin.alterPartitionReassignments({ topics: reassign, timeout: 10000 });
    // The same replicas in another order: nothing to copy, the reassignment completes at once. Wait for it.
    for (let i = 0; i < 50; i++) {
      const { topics: open } = await admin.listPartitionReassignments({ topics: reassign.map((r) => ({ topic: r.topic, partitions: r.partitionAssignment.map((a) => a.partition) })) });
      if (open.every((t) => t.partitions.length === 0)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await cluster.refreshMetadata();
    const broker = await cluster.findControllerBroker();
    const answer = await broker[symbolOf(broker, 'private:Broker:sendRequest')](electLeadersV1(chosen, 10000));
    if (answer.errorCode !== 0) throw new Error(`ElectLeaders failed with error code ${answer.errorCode}`);
    const failed = answer.results.filter((r) => r.errorCode !== 0 && r.errorCode !== ELECTION_NOT_NEEDED);
    if (failed.length > 0) throw new Error(`ElectLeaders: ${failed.map((f) => `${f.topic}[${f.partition}] error ${f.errorCode} ${f.message ?? ''}`).join('; ')}`);
    const moved = answer.results.filter((r) => r.errorCode === 0).length;
    log(`moved the leaders of ${moved} partition(s): ${[...chosen].map(([t, ps]) => `${t}[${ps.join(',')}]`).join(' ')}`);
    return moved;
  }

  async function round() {
    if (stopping) return;
    stats.rounds++;
    try {
      stats.moved += await moveOnce();
    } catch (err) {
      stats.errors++;
      stats.lastError = err.message;
      log(`leader move failed: ${err.message}`);
    }
  }

  return {
    moveOnce,
    start() {
      if (timer) return;
      const tick = () => {
        running = round().finally(() => {
          running = undefined;
          if (!stopping) timer = setTimeout(tick, intervalMs);
        });
      };
      timer = setTimeout(tick, intervalMs);
    },
    async stop() {
      stopping = true;
      clearTimeout(timer);
      await running;
      await Promise.all([admin.disconnect(), cluster.disconnect()]).catch(() => undefined);
      return { ...stats };
    },
  };
}

module.exports = { leaderMoves };

if (require.main === module) {
  const args = process.argv.slice(2);
  const option = (name, fallback) => {
    const i = args.indexOf(name);
    if (i < 0) return fallback;
    const [value] = args.splice(i, 2).slice(1);
    return value;
  };
  const brokers = option('--brokers', '127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194').split(',');
  const intervalMs = Number(option('--interval-ms', '3000'));
  const durationMs = Number(option('--duration-ms', '60000'));
  if (args.length === 0) {
    process.stderr.write('usage: leader-moves.js --brokers h:p[,h:p] [--interval-ms N] [--duration-ms N] topic...\n');
    process.exit(2);
  }
  const mover = leaderMoves({ brokers, topics: args, intervalMs, log: (line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`) });
  mover.start();
  const end = async () => {
    const stats = await mover.stop();
    process.stdout.write(`${JSON.stringify(stats)}\n`);
    process.exit(stats.moved > 0 ? 0 : 1);
  };
  setTimeout(end, durationMs);
  process.on('SIGTERM', end);
  process.on('SIGINT', end);
}
