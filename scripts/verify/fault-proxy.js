#!/usr/bin/env node
'use strict';
/**
 * A TCP fault proxy on loopback for the independent verifier (node:net only; nothing from libs/).
 *
 * API
 *   const proxy = await createFaultProxy({ listenPort: 0, targetHost: '127.0.0.1', targetPort: 5432,
 *                                          mode?: 'pass', latencyMs?: 0, listenHost?: '127.0.0.1' })
 *   proxy.port                 the bound port (listenPort 0 = any free port)
 *   proxy.setMode(mode, opts)  mode: 'pass' | 'latency' | 'reset' | 'blackhole' | 'half-open' | 'stall'
 *                              latency: setMode('latency', { ms: 200 }) or setMode('latency', 200) or 'latency:200'
 *   proxy.mode()               current mode name
 *   proxy.stats()              { mode, latencyMs, active, accepted, refused, reset,
 *                                forwarded: { c2s, s2c }, dropped: { c2s, s2c } }  (bytes; c2s = client to server)
 *   await proxy.close()        destroys every connection and closes the listener
 *
 * Modes (each applies at once to existing connections and to new ones):
 *   pass       forward both ways.
 *   latency    every chunk is delayed by ms in both directions; order is kept (a chunk never overtakes an earlier
 *              one, also across a change of ms or back to pass). FIN is delayed behind the data like a chunk.
 *   reset      every current connection is closed with RST on both sides (socket.resetAndDestroy()), and while the
 *              mode is set every new connection is accepted and immediately reset (the client sees ECONNRESET, not
 *              ECONNREFUSED: the port stays bound so nobody else can take it).
 *   blackhole  connections are accepted and kept open (also new ones, whose upstream connection is still made),
 *              but nothing is forwarded either way: bytes are DROPPED (counted in stats().dropped), as are FIN and
 *              errors of the other side, and bytes still queued by latency. Like a network partition in which the
 *              packets are lost. After the mode changes, forwarding resumes, but a connection that lost bytes has a
 *              hole in its byte stream (unlike real TCP, which would retransmit): its protocol is most likely
 *              desynchronised and it should be treated as dead; new connections are fine.
 *   half-open  server-to-client bytes (and FIN) are dropped; client-to-server still flows. The server gets the
 *              requests, the client never sees the answers.
 *   stall      (extra) nothing is forwarded, but bytes and FIN are HELD and delivered in order when the mode changes:
 *              a partition that heals before TCP gives up, with no hole in the stream.
 *
 * Kafka: a proxy in front of a broker only sees the bootstrap connection. A Kafka client asks the broker for
 * metadata, and the broker answers with its own advertised host:port; every later connection (produce, fetch,
 * group and transaction coordinator) goes straight there, around the proxy. So the proxy only works for Kafka when
 * the broker advertises the proxy's address, i.e. a dedicated listener, e.g.
 *   listeners=PLAINTEXT://127.0.0.1:9092,PROXIED://127.0.0.1:19094
 *   advertised.listeners=PLAINTEXT://127.0.0.1:9092,PROXIED://127.0.0.1:29094   (29094 = the proxy's listen port)
 *   listener.security.protocol.map=...,PROXIED:PLAINTEXT
 * with the proxy on 29094 -> 127.0.0.1:19094 and the client under test bootstrapping from 127.0.0.1:29094 (each
 * listener returns its own advertised address in metadata). A multi-broker cluster needs one proxy per broker.
 * Checked with Kafka 4.4.0 and kafkajs: bootstrapping through a proxy in front of the plain listener, a produce in
 * blackhole mode still succeeded in 1 ms (it went to the advertised port, around the proxy); with the PROXIED
 * listener above it timed out (Produce request timed out after 2 s), as it should.
 * PostgreSQL (and any protocol without such redirection) works as is: point the client at the proxy port.
 *
 * CLI (manual use)
 *   node scripts/verify/fault-proxy.js --listen 15432 --target 127.0.0.1:5432 [--mode pass]
 * reads commands as lines on stdin: pass | latency <ms> | reset | blackhole | half-open | stall | stats | quit
 * and answers each on stdout with one JSON line of stats(). End of stdin does not stop it: SIGINT/SIGTERM or quit.
 */
const net = require('node:net');
const readline = require('node:readline');

const MODES = new Set(['pass', 'latency', 'reset', 'blackhole', 'half-open', 'stall']);

function parseMode(mode, opts) {
  let name = mode;
  let ms;
  if (typeof mode === 'string' && mode.includes(':')) {
    const [n, v] = mode.split(':');
    name = n;
    ms = Number(v);
  }
  if (typeof opts === 'number') ms = opts;
  else if (opts && opts.ms !== undefined) ms = Number(opts.ms);
  if (!MODES.has(name)) throw new Error(`unknown mode ${mode}: use ${[...MODES].join(', ')}`);
  if (name === 'latency' && !(Number.isFinite(ms) && ms >= 0)) throw new Error('latency needs { ms: >= 0 }');
  return { name, ms };
}

function resetSocket(socket) {
  try {
    if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
    else socket.destroy();
  } catch {
    socket.destroy();
  }
}

async function createFaultProxy({
  listenPort = 0,
  listenHost = '127.0.0.1',
  targetHost = '127.0.0.1',
  targetPort,
  mode: initialMode = 'pass',
  latencyMs = 0,
} = {}) {
  if (!Number.isInteger(targetPort) || targetPort <= 0) throw new TypeError('targetPort must be a port number');
  const state = { mode: 'pass', latencyMs };
  const counters = {
    accepted: 0,
    refused: 0,
    reset: 0,
    forwarded: { c2s: 0, s2c: 0 },
    dropped: { c2s: 0, s2c: 0 },
  };
  const connections = new Set();

  const dropping = (dir) => state.mode === 'blackhole' || (state.mode === 'half-open' && dir === 's2c');
  const holding = () => state.mode === 'stall';

  function pump(conn, dir) {
    const d = conn.dirs[dir];
    if (d.timer) {
      clearTimeout(d.timer);
      d.timer = null;
    }
    if (conn.closed) return;
    if (dropping(dir)) {
      for (const item of d.queue) counters.dropped[dir] += item.chunk.length;
      d.queue.length = 0;
      return;
    }
    if (holding()) return;
    const now = Date.now();
    while (d.queue.length > 0 && d.queue[0].due <= now) {
      const { chunk } = d.queue.shift();
      counters.forwarded[dir] += chunk.length;
      if (!d.dest.destroyed && !d.dest.writableEnded && !d.dest.write(chunk) && !d.waitingDrain) {
        // Back-pressure: stop reading the source until the destination drained.
        d.waitingDrain = true;
        d.source.pause();
        d.dest.once('drain', () => {
          d.waitingDrain = false;
          d.source.resume();
        });
      }
    }
    if (d.queue.length > 0) {
      d.timer = setTimeout(() => pump(conn, dir), Math.max(1, d.queue[0].due - now));
    } else if (d.ended && !d.endSent) {
      d.endSent = true;
      if (!d.dest.destroyed) d.dest.end();
    }
    if (d.brokenPeer && d.queue.length === 0) destroyConnection(conn, false);
  }

  function destroyConnection(conn, rst) {
    if (conn.closed) return;
    conn.closed = true;
    for (const dir of ['c2s', 's2c']) {
      const d = conn.dirs[dir];
      if (d.timer) clearTimeout(d.timer);
      d.queue.length = 0;
    }
    for (const s of [conn.client, conn.upstream]) {
      if (rst) resetSocket(s);
      else s.destroy();
    }
    connections.delete(conn);
  }

  function onConnection(client) {
    if (state.mode === 'reset') {
      counters.refused++;
      client.on('error', () => {});
      resetSocket(client);
      return;
    }
    counters.accepted++;
    const upstream = net.connect({ host: targetHost, port: targetPort, allowHalfOpen: true });
    const conn = { client, upstream, closed: false, dirs: {} };
    conn.dirs.c2s = { source: client, dest: upstream, queue: [], lastDue: 0, timer: null, ended: false, endSent: false };
    conn.dirs.s2c = { source: upstream, dest: client, queue: [], lastDue: 0, timer: null, ended: false, endSent: false };
    connections.add(conn);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    for (const dir of ['c2s', 's2c']) {
      const d = conn.dirs[dir];
      d.source.on('data', (chunk) => {
        if (conn.closed) return;
        if (dropping(dir)) {
          counters.dropped[dir] += chunk.length;
          return;
        }
        const now = Date.now();
        const due = Math.max(now + (state.mode === 'latency' ? state.latencyMs : 0), d.lastDue);
        d.lastDue = due;
        d.queue.push({ chunk, due });
        if (d.queue.length === 1) pump(conn, dir);
      });
      d.source.on('end', () => {
        d.ended = true;
        if (d.queue.length === 0) pump(conn, dir);
      });
      // A socket that closes with an error (RST) or without having sent FIN breaks the connection: once the data
      // queued in its direction is delivered, the other side is destroyed too. While that direction is dropped or
      // held (blackhole, half-open, stall) the news is held back as well, until the mode changes.
      d.source.on('error', () => {});
      d.source.on('close', (hadError) => {
        if (conn.closed) return;
        if (conn.client.destroyed && conn.upstream.destroyed) {
          conn.closed = true;
          connections.delete(conn);
          return;
        }
        if (hadError || !d.ended) {
          d.brokenPeer = true;
          pump(conn, dir);
        }
      });
    }
    upstream.once('connect', () => {
      conn.upstreamConnected = true;
    });
    // The target could not be reached at all: reset the client.
    upstream.on('error', () => {
      if (!conn.upstreamConnected) destroyConnection(conn, true);
    });
  }

  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: false }, onConnection);
  server.on('error', () => {});

  function setMode(mode, opts) {
    const { name, ms } = parseMode(mode, opts);
    state.mode = name;
    if (name === 'latency') state.latencyMs = ms;
    if (name === 'reset') {
      for (const conn of [...connections]) {
        counters.reset++;
        destroyConnection(conn, true);
      }
      return;
    }
    for (const conn of [...connections]) {
      pump(conn, 'c2s');
      pump(conn, 's2c');
    }
  }

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: listenPort, host: listenHost, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  setMode(initialMode, initialMode === 'latency' ? { ms: latencyMs } : undefined);

  return {
    port: server.address().port,
    host: listenHost,
    setMode,
    mode: () => state.mode,
    stats: () => ({
      mode: state.mode,
      latencyMs: state.latencyMs,
      active: connections.size,
      accepted: counters.accepted,
      refused: counters.refused,
      reset: counters.reset,
      forwarded: { ...counters.forwarded },
      dropped: { ...counters.dropped },
    }),
    close: () =>
      new Promise((resolve) => {
        for (const conn of [...connections]) destroyConnection(conn, false);
        server.close(() => resolve());
      }),
  };
}

module.exports = { createFaultProxy, MODES: [...MODES] };

async function main(argv) {
  let listen = null;
  let target = null;
  let mode = 'pass';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--listen') listen = Number(argv[++i]);
    else if (a === '--target') target = argv[++i];
    else if (a === '--mode') mode = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  const m = /^(.+):(\d+)$/.exec(target || '');
  if (!Number.isInteger(listen) || !m) {
    throw new Error('usage: fault-proxy.js --listen <port> --target <host:port> [--mode pass|latency:<ms>|...]');
  }
  const proxy = await createFaultProxy({ listenPort: listen, targetHost: m[1], targetPort: Number(m[2]) });
  proxy.setMode(mode);
  process.stderr.write(`fault-proxy: 127.0.0.1:${proxy.port} -> ${m[1]}:${m[2]}, mode ${proxy.mode()} (commands on stdin)\n`);
  const stop = async () => {
    await proxy.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  rl.on('line', (line) => {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (!cmd) return;
    try {
      if (cmd === 'quit' || cmd === 'exit') return void stop();
      if (cmd !== 'stats') proxy.setMode(cmd, arg === undefined ? undefined : Number(arg));
      process.stdout.write(`${JSON.stringify(proxy.stats())}\n`);
    } catch (err) {
      process.stderr.write(`fault-proxy: ${err.message}\n`);
    }
  });
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`fault-proxy: ${err.message}\n`);
    process.exit(1);
  });
}
