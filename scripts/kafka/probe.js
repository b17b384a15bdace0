#!/usr/bin/env node
'use strict';
// Asks a Kafka broker for cluster metadata (Metadata v4, raw protocol, no dependencies) and exits 0 when
// it answers with at least one live broker and an active controller. Used by kafka.sh before npm install.
//   node scripts/kafka/probe.js [host:port] [timeoutMs]
const net = require('net');

const [host, portText] = (process.argv[2] || '127.0.0.1:9092').split(':');
const port = Number(portText || 9092);
const timeoutMs = Number(process.argv[3] || 2000);

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
  return { brokers, clusterId, controllerId };
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
    process.stdout.write(`cluster ${meta.clusterId}, brokers ${meta.brokers.map((b) => `${b.nodeId}@${b.host}:${b.port}`).join(',')}, controller ${meta.controllerId}\n`);
    process.exit(0);
  } catch (err) {
    fail(`${host}:${port} sent an unreadable metadata response: ${err.message}`);
  }
});
