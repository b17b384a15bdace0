'use strict';
/**
 * Checks of scripts/verify/fault-proxy.js (plain node:test, no jest):
 *
 *   node --test scripts/verify/fault-proxy.node-test.js                      echo-server checks only
 *   VERIFY_TEST_PG=postgres://postgres@127.0.0.1:5432/postgres node --test scripts/verify/fault-proxy.node-test.js
 *                                                                       plus the PostgreSQL checks
 */
const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const { createFaultProxy } = require('./fault-proxy');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function echoServer() {
  const received = { bytes: 0 };
  const sockets = new Set();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.on('data', (c) => {
      received.bytes += c.length;
      s.write(c);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    received,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

/** Collects what the socket receives; waitFor(n, ms) resolves with the bytes once n arrived, or rejects. */
function collector(socket) {
  const chunks = [];
  let length = 0;
  const events = { error: null, closed: false };
  socket.on('data', (c) => {
    chunks.push(c);
    length += c.length;
  });
  socket.on('error', (e) => {
    events.error = e;
  });
  socket.on('close', () => {
    events.closed = true;
  });
  return {
    events,
    get length() {
      return length;
    },
    buffer: () => Buffer.concat(chunks),
    async waitFor(n, ms = 2000) {
      const deadline = Date.now() + ms;
      while (length < n) {
        if (Date.now() > deadline) throw new Error(`got ${length} of ${n} bytes within ${ms} ms`);
        if (events.closed) throw new Error(`closed after ${length} of ${n} bytes (${events.error && events.error.code})`);
        await sleep(5);
      }
      return Buffer.concat(chunks);
    },
  };
}

test('echo: pass, latency (order kept across mode changes), stall, blackhole, half-open, reset, dead target', async (t) => {
  const echo = await echoServer();
  const proxy = await createFaultProxy({ listenPort: 0, targetHost: '127.0.0.1', targetPort: echo.port });
  try {
    await t.test('pass', async () => {
      const s = await connect(proxy.port);
      const c = collector(s);
      s.write('hello');
      assert.equal((await c.waitFor(5)).toString(), 'hello');
      // A large transfer (back-pressure path) arrives intact.
      const big = crypto.randomBytes(8 * 1024 * 1024);
      s.write(big);
      assert.ok((await c.waitFor(5 + big.length, 20000)).subarray(5).equals(big));
      s.destroy();
    });

    await t.test('latency', async () => {
      const s = await connect(proxy.port);
      const c = collector(s);
      proxy.setMode('latency', { ms: 150 });
      const t0 = Date.now();
      s.write('ping');
      await c.waitFor(4);
      const rtt = Date.now() - t0;
      assert.ok(rtt >= 290 && rtt < 800, `round trip ${rtt} ms with 150 ms each way`);
      // Many small writes while the delay changes, then back to pass: the echo comes back in order.
      const parts = [];
      for (let i = 0; i < 200; i++) {
        const part = Buffer.from(`<${i}:${crypto.randomBytes(4).toString('hex')}>`);
        parts.push(part);
        s.write(part);
        if (i === 50) proxy.setMode('latency', 300);
        if (i === 100) proxy.setMode('latency:20');
        if (i === 150) proxy.setMode('pass');
        if (i % 25 === 0) await sleep(3);
      }
      const all = Buffer.concat(parts);
      assert.ok((await c.waitFor(4 + all.length, 5000)).subarray(4).equals(all), 'order kept');
      s.destroy();
    });

    await t.test('stall holds bytes and delivers them when the mode changes', async () => {
      const s = await connect(proxy.port);
      const c = collector(s);
      proxy.setMode('stall');
      s.write('held');
      await sleep(300);
      assert.equal(c.length, 0);
      proxy.setMode('pass');
      assert.equal((await c.waitFor(4)).toString(), 'held');
      s.destroy();
    });

    await t.test('blackhole drops both ways and keeps connections open', async () => {
      const s = await connect(proxy.port);
      const c = collector(s);
      await sleep(20);
      const before = { ...proxy.stats().dropped };
      const serverBefore = echo.received.bytes;
      proxy.setMode('blackhole');
      s.write('lost');
      const fresh = await connect(proxy.port); // a new connection is still accepted
      const cf = collector(fresh);
      fresh.write('lost too');
      await sleep(400);
      assert.equal(c.length + cf.length, 0);
      assert.equal(echo.received.bytes, serverBefore, 'nothing reached the server');
      assert.equal(proxy.stats().dropped.c2s - before.c2s, 12);
      assert.ok(!c.events.closed && !cf.events.closed, 'connections stay open');
      proxy.setMode('pass');
      s.write('again'); // forwarding resumes (the dropped bytes stay lost)
      assert.equal((await c.waitFor(5)).toString(), 'again');
      s.destroy();
      fresh.destroy();
    });

    await t.test('half-open: client-to-server flows, server-to-client is dropped', async () => {
      const s = await connect(proxy.port);
      const c = collector(s);
      await sleep(20);
      const serverBefore = echo.received.bytes;
      proxy.setMode('half-open');
      s.write('one way');
      await sleep(400);
      assert.equal(echo.received.bytes - serverBefore, 7, 'the server got the bytes');
      assert.equal(c.length, 0, 'the client got nothing back');
      assert.ok(proxy.stats().dropped.s2c >= 7);
      proxy.setMode('pass');
      s.destroy();
    });

    await t.test('reset: current connections get RST, new ones are reset while set', async () => {
      const s = await connect(proxy.port);
      const c = collector(s);
      s.write('x');
      await c.waitFor(1);
      proxy.setMode('reset');
      await sleep(100);
      assert.ok(c.events.closed);
      assert.equal(c.events.error && c.events.error.code, 'ECONNRESET');
      const err = await new Promise((resolve) => {
        const n = net.connect(proxy.port, '127.0.0.1');
        n.on('connect', () => n.write('y'));
        n.on('error', resolve);
        n.on('close', () => resolve(null));
      });
      assert.equal(err && err.code, 'ECONNRESET');
      assert.equal(proxy.stats().active, 0);
      assert.ok(proxy.stats().refused >= 1 && proxy.stats().reset >= 1);
      proxy.setMode('pass');
      const again = await connect(proxy.port);
      const ca = collector(again);
      again.write('back');
      assert.equal((await ca.waitFor(4)).toString(), 'back');
      again.destroy();
    });

    await t.test('FIN travels both ways and the connection is forgotten', async () => {
      const s = await connect(proxy.port);
      const c = collector(s);
      s.end('bye');
      await sleep(200);
      assert.ok(c.events.closed, 'closed after both FINs');
      await sleep(50);
      assert.equal(proxy.stats().active, 0);
    });
  } finally {
    await proxy.close();
    await echo.close();
  }

  // A target that does not listen: the client is reset.
  const dead = await createFaultProxy({ listenPort: 0, targetPort: echo.port });
  try {
    const err = await new Promise((resolve) => {
      const n = net.connect(dead.port, '127.0.0.1');
      n.on('error', resolve);
      n.on('close', () => resolve(null));
    });
    assert.equal(err && err.code, 'ECONNRESET');
  } finally {
    await dead.close();
  }
});

const PG = process.env.VERIFY_TEST_PG;

test('PostgreSQL through the proxy', { skip: !PG && 'set VERIFY_TEST_PG' }, async (t) => {
  const { Client } = require('pg');
  const url = new URL(PG);
  const proxy = await createFaultProxy({ listenPort: 0, targetHost: url.hostname, targetPort: Number(url.port || 5432) });
  const viaProxy = (extra = {}) => {
    const u = new URL(PG);
    u.hostname = '127.0.0.1';
    u.port = String(proxy.port);
    const client = new Client({ connectionString: u.toString(), ...extra });
    client.on('error', () => {}); // connection errors also arrive as events
    return client;
  };
  const timed = async (fn) => {
    const t0 = Date.now();
    try {
      return { value: await fn(), ms: Date.now() - t0 };
    } catch (error) {
      return { error, ms: Date.now() - t0 };
    }
  };
  const direct = new Client({ connectionString: PG });
  await direct.connect();
  try {
    await t.test('pass', async () => {
      const c = viaProxy();
      await c.connect();
      const r = await timed(() => c.query('SELECT 1 AS one'));
      assert.equal(r.value.rows[0].one, 1);
      console.log(`pass: SELECT 1 in ${r.ms} ms`);
      await c.end();
    });

    await t.test('latency adds the delay each way', async () => {
      const c = viaProxy();
      await c.connect();
      const base = await timed(() => c.query('SELECT 1'));
      proxy.setMode('latency', { ms: 200 });
      const slow = await timed(() => c.query('SELECT 1'));
      proxy.setMode('pass');
      console.log(`latency 200: SELECT 1 in ${slow.ms} ms (pass: ${base.ms} ms)`);
      assert.ok(slow.ms >= 390 && slow.ms < 1500, `${slow.ms} ms`);
      await c.end();
    });

    await t.test('reset fails the query with a connection error, and new connections', async () => {
      const c = viaProxy();
      await c.connect();
      const q = timed(() => c.query('SELECT pg_sleep(0.5)'));
      await sleep(100);
      proxy.setMode('reset');
      const r = await q;
      console.log(`reset: query failed after ${r.ms} ms: ${r.error && r.error.message}`);
      assert.ok(r.error);
      assert.match(String(r.error.message), /ECONNRESET|Connection terminated|read ECONNRESET/);
      const n = await timed(() => viaProxy({ connectionTimeoutMillis: 2000 }).connect());
      console.log(`reset: new connection failed after ${n.ms} ms: ${n.error && (n.error.code || n.error.message)}`);
      assert.ok(n.error);
      proxy.setMode('pass');
    });

    await t.test('blackhole: the query hangs until the client gives up', async () => {
      const c = viaProxy({ query_timeout: 1500 });
      await c.connect();
      proxy.setMode('blackhole');
      const r = await timed(() => c.query('SELECT 1'));
      console.log(`blackhole: query ended after ${r.ms} ms: ${r.error && r.error.message}`);
      assert.ok(r.error && /timeout/i.test(r.error.message));
      assert.ok(r.ms >= 1400);
      const n = await timed(() => viaProxy({ connectionTimeoutMillis: 1000 }).connect());
      console.log(`blackhole: new connection ended after ${n.ms} ms: ${n.error && n.error.message}`);
      assert.ok(n.error && /timeout/i.test(n.error.message));
      proxy.setMode('pass');
      await c.end().catch(() => {});
    });

    await t.test('half-open: the server runs the query, the client hangs', async () => {
      const c = viaProxy({ query_timeout: 1500 });
      await c.connect();
      const marker = `half_open_${crypto.randomBytes(4).toString('hex')}`;
      const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      proxy.setMode('half-open');
      const r = await timed(() => c.query(`SELECT '${marker}'`));
      console.log(`half-open: query ended after ${r.ms} ms: ${r.error && r.error.message}`);
      assert.ok(r.error && /timeout/i.test(r.error.message));
      const seen = await direct.query('SELECT query FROM pg_stat_activity WHERE pid = $1', [pid]);
      assert.match(seen.rows[0].query, new RegExp(marker), 'the server received and ran the query');
      proxy.setMode('pass');
      await c.end().catch(() => {});
    });

    await t.test('after the faults, pass works again', async () => {
      const c = viaProxy();
      await c.connect();
      assert.equal((await c.query('SELECT 2 AS two')).rows[0].two, 2);
      await c.end();
    });
  } finally {
    await direct.end();
    await proxy.close();
  }
});
