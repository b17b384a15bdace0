#!/usr/bin/env node
'use strict';
// Asks a Kafka broker for cluster metadata (Metadata v4, raw protocol, no dependencies) and exits 0 when
// it answers with at least one live broker and an active controller. Used by kafka.sh before npm install.
//   node scripts/kafka/probe.js [host:port] [timeoutMs] [--min-brokers=N] [--has-broker=ID] [--in-sync]
// Options (used by kafka.sh --nodes 3): at least N live brokers; broker ID among the live ones; no partition
// of any topic with an in-sync replica set smaller than its replica set, or without a leader ("in sync"
// also adds the partition count to the answer).
const net = require('net');

const [host, portText] = (process.argv[2] || '127.0.0.1:9092').split(':');
const port = Number(portText || 9092);
const timeoutMs = Number(process.argv[3] || 2000);
const option = (name) => process.argv.slice(4).find((a) => a === `--${name}` || a.startsWith(`--${name}=`));
const value = (name) => { const a = option(name); return a && a.includes('=') ? Number(a.slice(a.indexOf('=') + 1)) : undefined; };
const minBrokers = value('min-brokers') || 1;
const hasBroker = value('has-broker');
const inSync = option('in-sync') !== undefined;

function request() {
  const clientId = Buffer.from('kafka-exactly-once-probe');
  const body = Buffer.alloc(2 + 2 + 4 + 2 + clientId.length + 4 + 1);
  let o = 0;
  o = body.writeInt16BE(3, o); // api key: Metadata
  o = body.writeInt16BE(4, o); // api version 4 (served by Kafka 3.x and 4.x)
  o = body.writeInt32BE(1, o); // correlation id
  o = body.writeInt16BE(clientId.length, o);
  o += clientId.copy(body, o);
  o = body.writeInt32BE(-1, o); // topics: null = none requested beyond brokers
  body.writeInt8(0, o); // allow_auto_topic_creation
  const size = Buffer.alloc(4);
  size.writeInt32BE(body.length, 0);
  return Buffer.concat([size, body]);
}

function parse(buf) {
  let o = 0;
  const i32 = () => { const v = buf.readInt32BE(o); o += 4; return v; };
  const i16 = () => { const v = buf.readInt16BE(o); o += 2; return v; };
  const str = () => { const n = i16(); if (n < 0) return null; const s = buf.toString('utf8', o, o + n); o += n; return s; };
  if (i32() !== 1) throw new Error('unexpected correlation id');
  i32(); // throttle_time_ms
  const brokers = [];
  for (let n = i32(); n > 0; n--) brokers.push({ nodeId: i32(), host: str(), port: i32(), rack: str() });
  const clusterId = str();
  const controllerId = i32();
  const i8 = () => { const v = buf.readInt8(o); o += 1; return v; };
  const ids = () => { const a = []; for (let n = i32(); n > 0; n--) a.push(i32()); return a; };
  const partitions = [];
  if (inSync) {
    // topics: null asks for all of them, internal ones included (Metadata v4)
    for (let t = i32(); t > 0; t--) {
      i16(); // error_code
      const topic = str();
      i8(); // is_internal
      for (let n = i32(); n > 0; n--) {
        i16(); // error_code
        const partition = i32();
        const leader = i32();
        const replicas = ids();
        const isr = ids();
        partitions.push({ topic, partition, leader, replicas, isr });
      }
    }
  }
  return { brokers, clusterId, controllerId, partitions };
}

const socket = net.connect({ host, port });
const timer = setTimeout(() => fail(`no answer from ${host}:${port} within ${timeoutMs} ms`), timeoutMs);
let received = Buffer.alloc(0);
function fail(reason) {
  clearTimeout(timer);
  socket.destroy();
  process.stderr.write(`${reason}\n`);
  process.exit(1);
}
socket.on('connect', () => socket.write(request()));
socket.on('error', (err) => fail(`cannot reach ${host}:${port}: ${err.code || err.message}`));
socket.on('data', (chunk) => {
  received = Buffer.concat([received, chunk]);
  if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return;
  clearTimeout(timer);
  socket.destroy();
  try {
    const meta = parse(received.subarray(4));
    if (meta.brokers.length === 0 || meta.controllerId < 0) fail(`${host}:${port} answers but has no live broker or controller yet`);
    const live = meta.brokers.map((b) => b.nodeId).sort((a, b) => a - b);
    if (live.length < minBrokers) fail(`${host}:${port} answers but lists ${live.length} of ${minBrokers} brokers (live: ${live.join(',')})`);
    if (hasBroker !== undefined && !live.includes(hasBroker)) fail(`${host}:${port} answers but broker ${hasBroker} is not live yet (live: ${live.join(',')})`);
    const lagging = meta.partitions.filter((p) => p.leader < 0 || p.isr.length < p.replicas.length);
    if (inSync && lagging.length > 0) {
      const first = lagging[0];
      fail(`${host}:${port}: ${lagging.length} of ${meta.partitions.length} partitions are under-replicated or leaderless (e.g. ${first.topic}-${first.partition}: leader ${first.leader}, replicas ${first.replicas.join(',')}, isr ${first.isr.join(',')})`);
    }
    const sync = inSync ? `, ${meta.partitions.length} partitions in sync` : '';
    process.stdout.write(`cluster ${meta.clusterId}, brokers ${meta.brokers.map((b) => `${b.nodeId}@${b.host}:${b.port}`).join(',')}, controller ${meta.controllerId}${sync}\n`);
    process.exit(0);
  } catch (err) {
    fail(`${host}:${port} sent an unreadable metadata response: ${err.message}`);
  }
});
