import { SchemaRegistryError } from '../errors/schema-registry.error';
import { DecodeError } from '../errors/decode.error';
import { frameForRegistry, registryIdOf } from './registry-framing';
import { MAX_LOOKUPS_PER_UNIT, MAX_UNKNOWN_IDS, MAX_WRITERS, RegistrySchemas, UNKNOWN_ID_MEMORY_MS, UNKNOWN_ID_WINDOW_FACTOR } from './registry-schemas';
import { decodeEvent } from '../formats/avro/avro.reader';
import { SchemaRegistry } from '../formats/avro/schema-registry';
import { encodeSingleObject } from '../formats/avro/single-object.codec';
import { formatRegistry } from '../formats/writer-codecs';
import { DEFAULT_JSON_LIMITS } from '../options/format-defaults';

const V1 = { type: 'record', name: 'Note', namespace: 't', fields: [{ name: 'id', type: 'string' }] };
const V2 = { type: 'record', name: 'Note', namespace: 't', fields: [{ name: 'id', type: 'string' }, { name: 'n', type: 'long', default: 0 }] };

/**
 * A registry's REST API answering from memory, as Confluent's does (its status codes and `error_code`s), the
 * transport the library's client calls.
 */
function fakeClient(_local?: SchemaRegistry) {
  const subjects = new Map<string, number[]>();
  const texts = new Map<number, { schema: string; schemaType?: string; references?: unknown[] }>();
  let nextId = 1;
  let down = false;
  const error = (status: number, code: number) => ({ status, body: { error_code: code, message: `error ${code}` } });
  const client = {
    calls: 0,
    /** While set, every answer waits for it (a registry that answers slowly). */
    hold: undefined as undefined | Promise<void>,
    /** What answers instead of the registry, while set (a proxy's page, say). */
    proxy: undefined as undefined | { status: number; body: unknown },
    set down(value: boolean) {
      down = value;
    },
    add(schema: string, extra: { schemaType?: string; references?: unknown[] } = {}, subject?: string): number {
      const id = nextId++;
      texts.set(id, { schema, ...extra });
      if (subject) subjects.set(subject, [...(subjects.get(subject) ?? []), id]);
      return id;
    },
    /** Deletes schema `id` for good (its subject versions too), as a registry's permanent delete does. */
    remove(id: number): void {
      texts.delete(id);
      for (const [subject, ids] of subjects) subjects.set(subject, ids.filter((i) => i !== id));
    },
    async register(schema: { schema: string }, { subject }: { subject: string }) {
      return { id: client.add(schema.schema, {}, subject) };
    },
    async request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
      client.calls++;
      await new Promise((resolve) => setImmediate(resolve));
      await client.hold;
      if (down) throw new Error('connect ECONNREFUSED');
      if (client.proxy) return client.proxy;
      let m: RegExpMatchArray | null;
      if (method === 'GET' && path === '/subjects') return { status: 200, body: [...subjects.keys()] };
      if (method === 'GET' && (m = path.match(/^\/schemas\/ids\/(\d+)$/))) {
        const found = texts.get(Number(m[1]));
        return found ? { status: 200, body: found } : error(404, 40403);
      }
      if (method === 'GET' && (m = path.match(/^\/subjects\/([^/]+)\/versions\/([^/]+)$/))) {
        const ids = subjects.get(decodeURIComponent(m[1]));
        if (!ids) return error(404, 40401);
        const id = m[2] === 'latest' ? ids[ids.length - 1] : ids[Number(m[2]) - 1];
        return id === undefined ? error(404, 40402) : { status: 200, body: { id, version: ids.indexOf(id) + 1, ...texts.get(id) } };
      }
      if (method === 'POST' && (m = path.match(/^\/subjects\/([^/]+)\/versions$/))) {
        return { status: 200, body: { id: client.add((body as { schema: string }).schema, {}, decodeURIComponent(m[1])) } };
      }
      if (method === 'POST' && (m = path.match(/^\/subjects\/([^/]+)$/))) {
        const ids = subjects.get(decodeURIComponent(m[1]));
        if (!ids) return error(404, 40401);
        const id = ids.find((i) => texts.get(i)!.schema === (body as { schema: string }).schema);
        return id === undefined ? error(404, 40403) : { status: 200, body: { id } };
      }
      return { status: 404, body: 'Not Found' };
    },
  };
  return client;
}

/** `promise`, settled `ms` later than it settles. */
async function withDelay<T>(promise: Promise<T>, ms: number): Promise<T> {
  const settled = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  await new Promise((resolve) => setTimeout(resolve, ms));
  if ('error' in settled) throw settled.error;
  return settled.value;
}

const options = (overrides: Partial<ConstructorParameters<typeof RegistrySchemas>[0]> = {}) => ({
  url: 'http://registry.test',
  subjectNameStrategy: 'topic' as const,
  autoRegister: false,
  requestTimeoutMs: 1000,
  unknownIdWaitMs: 0,
  missingPeerWaitMs: 0,
  ...overrides,
});

describe('the Schema Registry as the library uses it', () => {
  const local = SchemaRegistry.fromSchemas([{ schema: V1, file: 'note.v1.avsc' }, { schema: V2, file: 'note.v2.avsc' }]);
  const [v1] = [SchemaRegistry.fromSchemas([{ schema: V1, file: 'note.v1.avsc' }]).current('t.Note')];
  const v2 = local.current('t.Note');

  it('names subjects by the configured strategy', () => {
    const client = fakeClient(local);
    expect(formatRegistry(options(), 'bigint', client).subjectOf('orders', 't.Note')).toBe('orders-value');
    expect(formatRegistry(options({ subjectNameStrategy: 'record' }), 'bigint', client).subjectOf('orders', 't.Note')).toBe('t.Note');
    expect(formatRegistry(options({ subjectNameStrategy: 'topic-record' }), 'bigint', client).subjectOf('orders', 't.Note')).toBe('orders-t.Note');
  });

  it('reads a value of either framing on one topic, resolving an older writer to the reader', async () => {
    const client = fakeClient(local);
    const remote = formatRegistry(options(), 'bigint', client);
    const registry = SchemaRegistry.fromSchemas([{ schema: V1, file: 'note.v1.avsc' }, { schema: V2, file: 'note.v2.avsc' }]);
    registry.remote = remote;
    const { id } = await client.register({ schema: v1.text }, { subject: 'orders-value' });
    const framed = frameForRegistry(id, v1.type.toBuffer({ id: 'written by another service' }));
    await expect(async () => decodeEvent(registry, v2, framed)).rejects.toThrow(SchemaRegistryError); // not fetched yet
    await remote.prefetch([framed, encodeSingleObject(v2, { id: 'single', n: 2n })]);
    expect(decodeEvent(registry, v2, framed)).toEqual({ id: 'written by another service', n: 0n });
    expect(decodeEvent(registry, v2, encodeSingleObject(v2, { id: 'single', n: 2n }))).toEqual({ id: 'single', n: 2n });
    // Cached for good: the registry away, it still reads.
    client.down = true;
    const before = client.calls;
    await remote.prefetch([framed]);
    expect(decodeEvent(registry, v2, framed)).toEqual({ id: 'written by another service', n: 0n });
    expect(client.calls).toBe(before);
  });

  it('classes an id the registry does not know as a decode failure, and a registry that does not answer as unavailable', async () => {
    const client = fakeClient(local);
    const remote = formatRegistry(options(), 'bigint', client);
    const registry = SchemaRegistry.fromSchemas([{ schema: V2, file: 'note.v2.avsc' }]);
    registry.remote = remote;
    const unknown = frameForRegistry(999, Buffer.from([2, 0x61]));
    await remote.prefetch([unknown]);
    expect(() => decodeEvent(registry, v2, unknown)).toThrow(DecodeError);
    expect(() => decodeEvent(registry, v2, unknown)).toThrow(/schema id 999, which the registry says does not exist/);
    client.down = true;
    const other = frameForRegistry(7, Buffer.from([2, 0x61]));
    await expect(remote.prefetch([other])).rejects.toMatchObject({ name: 'SchemaRegistryError', failure: 'unavailable', retriable: true });
    // Without a registry configured, the framing alone is a decode failure.
    const plain = SchemaRegistry.fromSchemas([{ schema: V2 }]);
    expect(() => decodeEvent(plain, v2, unknown)).toThrow(/framed for a Schema Registry .* no schemaRegistry option/);
  });

  it('writes with the id of the schema under its subject: cached, looked up again when missing, registered only with autoRegister', async () => {
    const client = fakeClient(local);
    const remote = formatRegistry(options(), 'bigint', client);
    await expect(remote.idFor('orders-value', v2)).rejects.toMatchObject({ failure: 'no-id', message: expect.stringMatching(/registering at run time is off: register it at deploy time \(npx kafka-eo schemas register\)/) });
    // A write looks it up again, and says why there is none.
    await expect(remote.idSoon('orders-value', v2)).rejects.toMatchObject({ failure: 'no-id', message: expect.stringMatching(/registering at run time is off/) });
    const id = await remote.register('orders-value', v2);
    expect(await remote.idFor('orders-value', v2)).toBe(id);
    expect(remote.idSoon('orders-value', v2)).toBe(id); // cached: at once, no promise
    client.down = true;
    expect(remote.idSoon('orders-value', v2)).toBe(id); // cached: writes go on while the registry is away

    const registering = formatRegistry(options({ autoRegister: true }), 'bigint', fakeClient(local));
    expect(await registering.idFor('payments-value', v2)).toBeGreaterThan(0);
  });

  it('makes a write whose id is still being looked up wait for that lookup (no second request), within requestTimeoutMs', async () => {
    const client = fakeClient(local);
    const id = (await client.register({ schema: v2.text }, { subject: 'orders-value' })).id;
    const remote = formatRegistry(options({ requestTimeoutMs: 200 }), 'bigint', client);
    let answer!: () => void;
    client.hold = new Promise((resolve) => (answer = resolve));
    const boot = remote.idFor('orders-value', v2); // the boot's lookup, under way
    const write = remote.idSoon('orders-value', v2);
    expect(write).toBeInstanceOf(Promise);
    setTimeout(answer, 50);
    await expect(write).resolves.toBe(id);
    await expect(boot).resolves.toBe(id);
    expect(client.calls).toBe(1);
    // A write of a subject never looked up starts the lookup itself, and waits for it.
    client.hold = undefined;
    const other = (await client.register({ schema: v2.text }, { subject: 'other-value' })).id;
    await expect(remote.idSoon('other-value', v2)).resolves.toBe(other);
    // Registering at run time, each request within requestTimeoutMs but both together later: the write fails as
    // the registry away does, and the lookup runs on, for a later write to find at once.
    const slow = fakeClient(local);
    const registering = formatRegistry(options({ requestTimeoutMs: 100, autoRegister: true }), 'bigint', { request: (method, path, body) => withDelay(slow.request(method, path, body), 60) });
    await expect(registering.idSoon('late-value', v2)).rejects.toMatchObject({ failure: 'unavailable', message: expect.stringMatching(/did not give the id of t\.Note under subject late-value within 100 ms \(schemaRegistry\.requestTimeoutMs\)/) });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(registering.idSoon('late-value', v2)).toEqual(expect.any(Number));
    expect(slow.calls).toBe(2); // the lookup and the registration, once
  });

  it('finds the id of a topic it may only read at boot without registering it, whatever autoRegister says', async () => {
    const client = fakeClient(local);
    const remote = formatRegistry(options({ autoRegister: true }), 'bigint', client);
    expect(await remote.findId('orders-value', v2)).toBeUndefined();
    expect(await remote.latest('orders-value')).toBeUndefined(); // nothing registered
    const id = (await client.register({ schema: v2.text }, { subject: 'orders-value' })).id;
    expect(await remote.findId('orders-value', v2)).toBe(id);
    const calls = client.calls;
    expect(remote.idSoon('orders-value', v2)).toBe(id); // kept for writes
    expect(client.calls).toBe(calls);
  });

  it('gives the latest schema of a subject, or none', async () => {
    const client = fakeClient(local);
    const remote = formatRegistry(options(), 'bigint', client);
    expect(await remote.latest('nothing-value')).toBeUndefined();
    await client.register({ schema: v1.text }, { subject: 'orders-value' });
    const { id } = await client.register({ schema: v2.text }, { subject: 'orders-value' });
    expect(await remote.latest('orders-value')).toMatchObject({ id });
  });
});

describe('the Schema Registry client\'s authentication', () => {
  const schema = JSON.stringify({ schema: JSON.stringify({ type: 'record', name: 'Note', namespace: 't', fields: [{ name: 'id', type: 'string' }] }) });

  /** A registry answering GET /schemas/ids/1 on 127.0.0.1, keeping each request's Authorization header. */
  async function serve(): Promise<{ url: string; seen: string[]; close: () => Promise<void> }> {
    const { createServer } = await import('http');
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(String(req.headers.authorization));
      res.setHeader('content-type', 'application/vnd.schemaregistry.v1+json');
      res.end(schema);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise((resolve) => server.close(() => resolve())) };
  }

  it('sends basic credentials, and a bearer token asked for each request', async () => {
    const server = await serve();
    try {
      await formatRegistry(options({ url: server.url, auth: { username: 'key', password: 'secret' } }), 'bigint').prefetch([frameForRegistry(1, Buffer.alloc(0))]);
      let n = 0;
      const bearer = formatRegistry(options({ url: server.url, auth: { bearerToken: async () => `token-${++n}` } }), 'bigint');
      await bearer.prefetch([frameForRegistry(1, Buffer.alloc(0))]);
      expect(server.seen).toEqual([`Basic ${Buffer.from('key:secret').toString('base64')}`, 'Bearer token-1']);
    } finally {
      await server.close();
    }
  });
});

describe('reading writer schemas from the registry, whatever it holds', () => {
  const reader = SchemaRegistry.fromSchemas([{ schema: V2, file: 'note.v2.avsc' }]);
  const note = reader.current('t.Note');
  const setUp = (now: () => number = Date.now, unknownIdWaitMs = 0) => {
    const client = fakeClient();
    const remote = formatRegistry(options({ unknownIdWaitMs }), 'bigint', client, now);
    const registry = SchemaRegistry.fromSchemas([{ schema: V2, file: 'note.v2.avsc' }]);
    registry.remote = remote;
    return { client, remote, registry };
  };
  const V3 = { ...V2, fields: [...V2.fields, { name: 'tag', type: ['null', 'string'], default: null }] };
  const body = (schema: object, value: object) => SchemaRegistry.fromSchemas([{ schema }]).current('t.Note').type.toBuffer(value);

  it('reads any number of versions of one record side by side, in any order, for the life of the process', async () => {
    const { client, remote, registry } = setUp();
    const ids = [V1, V2, V3].map((schema) => client.add(JSON.stringify(schema), {}, 'notes-value'));
    const values = [
      frameForRegistry(ids[0], body(V1, { id: 'a' })),
      frameForRegistry(ids[2], body(V3, { id: 'c', n: 3n, tag: 'x' })),
      frameForRegistry(ids[1], body(V2, { id: 'b', n: 2n })),
    ];
    // One unit each, as a running consumer meets them (a writer rolled back, old writers still running).
    for (const value of [...values, ...values.slice().reverse()]) {
      await remote.prefetch([value]);
      expect(() => decodeEvent(registry, note, value)).not.toThrow();
    }
    expect([values[0], values[2], values[1]].map((v) => decodeEvent(registry, note, v))).toEqual([{ id: 'a', n: 0n }, { id: 'b', n: 2n }, { id: 'c', n: 3n }]);
  });

  it('fetches an id once when two partitions need it at the same moment', async () => {
    const { client, remote, registry } = setUp();
    const id1 = client.add(JSON.stringify(V1));
    const id2 = client.add(JSON.stringify(V3));
    const a = frameForRegistry(id1, body(V1, { id: 'a' }));
    const b = frameForRegistry(id2, body(V3, { id: 'b', n: 1n, tag: null }));
    const before = client.calls;
    await Promise.all([remote.prefetch([a, b]), remote.prefetch([b, a]), remote.prefetch([a])]);
    expect(client.calls - before).toBe(2);
    expect(decodeEvent(registry, note, b)).toEqual({ id: 'b', n: 1n });
  });

  it('reads a writer whose union Avro cannot hold as plain values (["int","double"]), and dead-letters one it cannot build, naming the schema problem', async () => {
    const { client, remote, registry } = setUp();
    const ambiguous = { ...V2, fields: [...V2.fields, { name: 'amount', type: ['int', 'double'] }] };
    const id = client.add(JSON.stringify(ambiguous));
    const writer = SchemaRegistry.fromSchemas([{ schema: { ...V2, fields: [...V2.fields, { name: 'amount', type: 'double' }] } }]).current('t.Note');
    // The body of ["int","double"]'s branch 1 (double) is what a double field's is, after the branch index.
    const value = frameForRegistry(id, Buffer.concat([writer.type.toBuffer({ id: 'u', n: 5n, amount: 1.5 }).subarray(0, 3), Buffer.from([2]), writer.type.toBuffer({ id: 'u', n: 5n, amount: 1.5 }).subarray(3)]));
    await remote.prefetch([value]);
    expect(decodeEvent(registry, note, value)).toEqual({ id: 'u', n: 5n });

    const broken = client.add(JSON.stringify({ type: 'record', name: 'Note', namespace: 't', fields: [{ name: 'id', type: 't.Missing' }] }));
    const notJson = client.add('{"type": "record",');
    const protobuf = client.add('syntax = "proto3"; message Note { string id = 1; }', { schemaType: 'PROTOBUF' });
    const values = [broken, notJson, protobuf].map((i) => frameForRegistry(i, Buffer.from([2, 0x61])));
    await remote.prefetch(values); // no registry fault: each is a record problem
    expect(() => decodeEvent(registry, note, values[0])).toThrow(DecodeError);
    expect(() => decodeEvent(registry, note, values[0])).toThrow(/schema id \d+, and the registry's schema id \d+ is not an Avro schema this library can build: .*t\.Missing/);
    expect(() => decodeEvent(registry, note, values[1])).toThrow(/is not valid JSON/);
    expect(() => decodeEvent(registry, note, values[2])).toThrow(/a PROTOBUF schema under this id/);
    expect(() => decodeEvent(registry, note, values[0])).not.toThrow(/Schema Registry at/);
  });

  it('reads a writer with schema references, each built in the writer\'s own type registry', async () => {
    const { client, remote, registry } = setUp();
    const tag = { type: 'record', name: 'Tag', namespace: 't', fields: [{ name: 'label', type: 'string' }] };
    client.add(JSON.stringify(tag), {}, 'tag-value');
    const withRef = { ...V2, fields: [...V2.fields, { name: 'tag', type: ['null', 't.Tag'], default: null }] };
    const id = client.add(JSON.stringify(withRef), { references: [{ name: 't.Tag', subject: 'tag-value', version: 1 }] });
    const full = SchemaRegistry.fromSchemas([{ schema: { ...V2, fields: [...V2.fields, { name: 'tag', type: ['null', tag], default: null }] } }]).current('t.Note');
    const value = frameForRegistry(id, full.type.toBuffer({ id: 'r', n: 1n, tag: { label: 'l' } }));
    await remote.prefetch([value]);
    expect(decodeEvent(registry, note, value)).toEqual({ id: 'r', n: 1n });
  });

  it('tells the registry\'s "no schema of this id" (40403) from any other 404, and never takes it as final for the next unit of work', async () => {
    let now = 1_000_000;
    const { client, remote, registry } = setUp(() => now);
    const value = frameForRegistry(7, body(V1, { id: 'late' }));
    // A proxy's 404 (or a base URL without the registry's API): the registry is not reached, the record waits.
    client.proxy = { status: 404, body: '<html>Not Found</html>' };
    await expect(remote.prefetch([value])).rejects.toMatchObject({ failure: 'unavailable', message: expect.stringMatching(/404 <html>Not Found<\/html> \(a 404 that is not a registry's answer: check schemaRegistry\.url/) });
    expect(remote.writer(7)).toBeUndefined();
    client.proxy = undefined;
    // The registry's own answer, with no wait configured: a decode failure of this record.
    await remote.prefetch([value]);
    expect(() => decodeEvent(registry, note, value)).toThrow(/schema id 7, which the registry says does not exist/);
    while (client.add(JSON.stringify(V1)) < 7); // id 7 registered since (a writer, or a replica catching up)
    // The next unit asks again at once: the records of id 7 read from now on.
    now += 1;
    const calls = client.calls;
    await remote.prefetch([value]);
    expect(client.calls).toBe(calls + 1);
    expect(decodeEvent(registry, note, value)).toEqual({ id: 'late', n: 0n });
  });

  it('makes the records of an id the registry does not know wait unknownIdWaitMs, asking again at each retry, then dead-letters them', async () => {
    let now = 1_000_000;
    const wait = 30_000;
    const { client, remote, registry } = setUp(() => now, wait);
    const value = frameForRegistry(9, body(V1, { id: 'x' }));
    const waits = () => remote.prefetch([value]).then(() => undefined, (err: unknown) => err);
    // Unknown: the unit waits (an infrastructure fault, retried: its records are not decoded meanwhile).
    expect(await waits()).toMatchObject({ name: 'SchemaRegistryError', failure: 'unknown-id', retriable: true, message: expect.stringMatching(/no schema of id 9 \(yet\): records framed with it wait up to 30000 ms \(schemaRegistry\.unknownIdWaitMs\).*\(0 ms so far\)/) });
    now += wait - 1;
    const calls = client.calls;
    expect(await waits()).toMatchObject({ failure: 'unknown-id', message: expect.stringMatching(/\(29999 ms so far\)/) });
    expect(client.calls).toBe(calls + 1); // asked again
    // The wait over, and the registry still says so on a fresh answer: the record's decode failure.
    now += 1;
    expect(await waits()).toBeUndefined();
    expect(client.calls).toBe(calls + 2);
    expect(() => decodeEvent(registry, note, value)).toThrow(DecodeError);
    expect(() => decodeEvent(registry, note, value)).toThrow(/schema id 9, which the registry says does not exist \(asked again for 30000 ms: schemaRegistry\.unknownIdWaitMs\)/);
    // Registered later: the next unit asks again, and its records read (nothing remembered as final).
    while (client.add(JSON.stringify(V1)) < 9);
    now += 1;
    expect(await waits()).toBeUndefined();
    expect(decodeEvent(registry, note, value)).toEqual({ id: 'x', n: 0n });
  });

  it('counts the wait from the first "not found" across retries, however far apart, and waits anew for an id not asked about for long', async () => {
    let now = 1_000_000;
    const wait = 10_000;
    const { remote, registry } = setUp(() => now, wait);
    const value = frameForRegistry(11, body(V1, { id: 'x' }));
    const failure = () => remote.prefetch([value]).then(() => undefined, (err: unknown) => (err as { failure: string }).failure);
    expect(await failure()).toBe('unknown-id');
    // A retry far apart (a registry away meanwhile): still the same wait, now over.
    now += 5 * wait;
    expect(await failure()).toBeUndefined();
    expect(() => decodeEvent(registry, note, value)).toThrow(DecodeError);
    // Asked again soon: at once a decode failure (after a fresh answer).
    now += 1000;
    expect(await failure()).toBeUndefined();
    // Not asked about for UNKNOWN_ID_MEMORY_MS: a record naming it waits anew.
    now += UNKNOWN_ID_MEMORY_MS;
    expect(await failure()).toBe('unknown-id');
  });

  it('does not wait for an unknown id below one the registry gave unknownIdWaitMs ago (ids are given in increasing order), and waits for one above', async () => {
    let now = 1_000_000;
    const wait = 30_000;
    const { client, remote, registry } = setUp(() => now, wait);
    const [, gone, known] = [V1, V1, V1].map((schema) => client.add(JSON.stringify(schema)));
    client.remove(gone);
    const value = (id: number) => frameForRegistry(id, body(V1, { id: 'x' }));
    const failure = (id: number, partition: string) => remote.prefetch([value(id)], partition).then(() => undefined, (err: unknown) => (err as { failure: string }).failure);
    expect(await failure(known, 'orders[0]')).toBeUndefined();
    // Moments after the registry gave a higher id, a lower one it does not know may be a replica lagging: it waits.
    now += 1000;
    expect(await failure(gone, 'orders[0]')).toBe('unknown-id');
    // Once the higher id is unknownIdWaitMs old, a lower unknown id is not coming: a decode failure on a fresh answer
    // (before its own wait is over).
    now += wait - 500;
    const calls = client.calls;
    expect(await failure(gone, 'orders[1]')).toBeUndefined();
    expect(client.calls).toBe(calls + 1);
    expect(() => decodeEvent(registry, note, value(gone))).toThrow(DecodeError);
    expect(() => decodeEvent(registry, note, value(gone))).toThrow(new RegExp(`schema id ${gone}, which the registry says does not exist \\(not waited for: the registry gave id ${known} more than 30000 ms ago, and gives ids in increasing order\\)`));
    // An id above every id given may be a registration under way: it waits.
    expect(await failure(known + 100, 'orders[1]')).toBe('unknown-id');
  });

  it('makes a flood of unknown ids cost a partition unknownIdWaitMs at most per window, however many units of work it fills, other partitions keeping their own', async () => {
    let now = 1_000_000;
    const wait = 10_000;
    const { remote, registry } = setUp(() => now, wait);
    const flood = Array.from({ length: 1000 }, (_, i) => frameForRegistry(50_000 + ((i * 7919) % 1000), Buffer.from([2, 0x61])));
    // The partition's consumer, as the engine runs it: a unit of the records it may afford, retried a second later
    // while its prefetch says the registry has no schema of an id yet; then its records are read (dead-lettered).
    const consume = async (values: Buffer[], partition: string) => {
      const started = now;
      for (let index = 0; index < values.length; ) {
        const unit = values.slice(index, index + remote.affordable(values.slice(index)));
        const failure = await remote.prefetch(unit, partition).then(() => undefined, (err: unknown) => (err as { failure: string }).failure);
        if (failure === 'unknown-id') {
          now += 1000;
          continue;
        }
        expect(failure).toBeUndefined();
        for (const value of unit) expect(() => decodeEvent(registry, note, value)).toThrow(DecodeError);
        index += unit.length;
        now += 10;
      }
      return now - started;
    };
    // 63 units of 16 ids: each waited unknownIdWaitMs before, about 10.5 minutes; now the first one only.
    expect(await consume(flood, 'orders[0]')).toBeLessThan(2 * wait);
    expect(() => decodeEvent(registry, note, flood[flood.length - 1])).toThrow(/not waited for: this partition already waited 10000 ms for ids the registry does not know within 100000 ms \(schemaRegistry\.unknownIdWaitMs\)/);
    // Another partition has its own: a new unknown id waits there.
    await expect(remote.prefetch([frameForRegistry(90_000, Buffer.alloc(1))], 'orders[1]')).rejects.toMatchObject({ failure: 'unknown-id' });
    // The first partition, in its window still: a new unknown id does not wait; past the window, it does.
    await expect(remote.prefetch([frameForRegistry(90_001, Buffer.alloc(1))], 'orders[0]')).resolves.toBeUndefined();
    now += UNKNOWN_ID_WINDOW_FACTOR * wait;
    await expect(remote.prefetch([frameForRegistry(90_002, Buffer.alloc(1))], 'orders[0]')).rejects.toMatchObject({ failure: 'unknown-id' });
  });

  it('counts only the time a partition waited: a short wait for an id registered moments later leaves the rest of the budget', async () => {
    let now = 1_000_000;
    const wait = 10_000;
    const { client, remote, registry } = setUp(() => now, wait);
    const late = frameForRegistry(1, body(V1, { id: 'late' }));
    await expect(remote.prefetch([late], 'orders[0]')).rejects.toMatchObject({ failure: 'unknown-id' });
    now += 2000;
    client.add(JSON.stringify(V1)); // id 1 registered: the next retry reads it
    await remote.prefetch([late], 'orders[0]');
    expect(decodeEvent(registry, note, late)).toEqual({ id: 'late', n: 0n });
    // Later in the window, another id not registered yet still waits: 2 s of 10 were spent.
    now += 5000;
    const next = frameForRegistry(2, body(V1, { id: 'next' }));
    await expect(remote.prefetch([next], 'orders[0]')).rejects.toMatchObject({ failure: 'unknown-id' });
    now += 7000;
    await expect(remote.prefetch([next], 'orders[0]')).rejects.toMatchObject({ failure: 'unknown-id' });
    now += 1000;
    await expect(remote.prefetch([next], 'orders[0]')).resolves.toBeUndefined();
    expect(() => decodeEvent(registry, note, next)).toThrow(/not waited for: this partition already waited 10000 ms/);
  });

  it('bounds the ids one unit looks up, and the ids it remembers as unknown', async () => {
    const { remote } = setUp();
    const flood = Array.from({ length: 100 }, (_, i) => frameForRegistry(1000 + (i % 40), Buffer.from([2, 0x61])));
    const first = remote.affordable(flood);
    expect(new Set(flood.slice(0, first).map(registryIdOf)).size).toBe(MAX_LOOKUPS_PER_UNIT);
    expect(registryIdOf(flood[first])).not.toBe(undefined);
    expect(flood.slice(0, first).map(registryIdOf)).not.toContain(registryIdOf(flood[first]));
    await remote.prefetch(flood.slice(0, first));
    // Ids the registry does not know are asked again by the next unit: they still count.
    expect(remote.affordable(flood)).toBe(first);
    expect(remote.affordable([frameForRegistry(5000, Buffer.alloc(1))])).toBe(1);
    for (let n = 0; n < MAX_UNKNOWN_IDS + 50; n += 16) {
      await remote.prefetch(Array.from({ length: 16 }, (_, i) => frameForRegistry(100_000 + n + i, Buffer.alloc(1))));
    }
    expect((remote as unknown as { unknownIds: Map<number, unknown> }).unknownIds.size).toBeLessThanOrEqual(MAX_UNKNOWN_IDS);
  });

  it('keeps at most MAX_WRITERS writer schemas: the oldest fetched is forgotten, and fetched again when a record needs it', async () => {
    const { client, remote, registry } = setUp();
    const writers = (remote as unknown as { writers: Map<number, unknown> }).writers;
    // The first five records, the others primitive schemas (ten thousand records take a while to build).
    const ids = Array.from({ length: MAX_WRITERS + 5 }, (_, i) => client.add(JSON.stringify(i < 5 ? V1 : 'string')));
    const bodies = new Map(Array.from({ length: 5 }, (_, i) => [ids[i], body(V1, { id: `n-${ids[i]}` })]));
    const value = (id: number) => frameForRegistry(id, bodies.get(id) ?? Buffer.from('02', 'hex'));
    let largest = 0;
    // One id per unit of work, in order; the first few decoded as records of them would be.
    for (const id of ids) {
      await remote.prefetch([value(id)]);
      largest = Math.max(largest, writers.size);
      if (id <= ids[4]) expect(decodeEvent(registry, note, value(id))).toEqual({ id: `n-${id}`, n: 0n });
    }
    expect(largest).toBe(MAX_WRITERS);
    expect(writers.size).toBe(MAX_WRITERS);
    // The five fetched first are forgotten; every later one is kept, without asking the registry again.
    for (const id of ids.slice(0, 5)) expect(remote.writer(id)).toBeUndefined();
    expect(() => decodeEvent(registry, note, value(ids[0]))).toThrow(SchemaRegistryError); // not fetched (any more)
    const before = client.calls;
    await remote.prefetch(ids.slice(5).map(value));
    expect(client.calls).toBe(before);
    for (const id of [ids[5], ids[ids.length - 1]]) expect(remote.writer(id)).toEqual({ codec: expect.objectContaining({ schemaType: 'AVRO' }) });
    // A forgotten writer's next record fetches it again (one request), and makes room by forgetting the oldest kept.
    await remote.prefetch([value(ids[0])]);
    expect(client.calls).toBe(before + 1);
    expect(decodeEvent(registry, note, value(ids[0]))).toEqual({ id: `n-${ids[0]}`, n: 0n });
    expect(remote.writer(ids[5])).toBeUndefined();
    expect(writers.size).toBe(MAX_WRITERS);
    // Nothing else holds the writers of every id ever read: the resolvers of a reader are not kept by id.
    const resolvers = (registry as unknown as { resolvers: Map<string, unknown> }).resolvers;
    expect([...resolvers.keys()].filter((key) => key.includes(':id-')).length).toBe(0);
  });

  it('says which framings a topic reads when a value has neither', async () => {
    const { registry } = setUp();
    for (const [value, start] of [[Buffer.from([1, 2, 3]), '01 02 03 (3 bytes)'], [Buffer.from([0, 0, 1]), '00 00 01 (3 bytes)'], [Buffer.alloc(0), 'empty']] as const) {
      expect(() => decodeEvent(registry, note, value)).toThrow(new RegExp(`neither framing this topic reads: Avro single-object encoding \\(C3 01.*or a Schema Registry's \\(00, then a 4-byte schema id.*${start.replace(/[()]/g, '\\$&')}`));
    }
    const plain = SchemaRegistry.fromSchemas([{ schema: V2 }]);
    expect(() => decodeEvent(plain, note, Buffer.from([1, 2, 3]))).toThrow(/not Avro single-object encoded \(C3 01, then an 8-byte schema fingerprint and the body\); it starts with 01 02 03 \(3 bytes\)/);
  });

  it('refuses a URL that answers but not as a registry, and tells it from one that does not answer', async () => {
    const { client, remote } = setUp();
    await expect(remote.probe()).resolves.toBeUndefined();
    client.proxy = { status: 404, body: { timestamp: 1, status: 404, error: 'Not Found', path: '/subjects' } };
    await expect(remote.probe()).rejects.toMatchObject({ failure: 'not-a-registry', retriable: false, message: expect.stringMatching(/answers, but not as a Confluent-compatible Schema Registry .* Apicurio's is under \/apis\/ccompat\/v7/) });
    client.proxy = { status: 200, body: '<html>welcome</html>' };
    await expect(remote.probe()).rejects.toMatchObject({ failure: 'not-a-registry' });
    client.proxy = { status: 503, body: 'upstream away' };
    await expect(remote.probe()).rejects.toMatchObject({ failure: 'unavailable' });
    client.proxy = undefined;
    client.down = true;
    await expect(remote.probe()).rejects.toMatchObject({ failure: 'unavailable' });
  });

  it('builds JSON Schema and Protobuf writers from the registry\'s schemaType, with their references by name, and an Avro reader still says they are not Avro', async () => {
    const { client, remote, registry } = setUp();
    client.add(JSON.stringify({ type: 'string', minLength: 2 }), { schemaType: 'JSON' }, 'code-value');
    const json = client.add(JSON.stringify({ type: 'object', properties: { code: { $ref: 'code.json' }, n: { type: 'integer' } } }), { schemaType: 'JSON', references: [{ name: 'code.json', subject: 'code-value', version: 1 }] });
    client.add('syntax = "proto3"; package m; message Money { int64 units = 1; }', { schemaType: 'PROTOBUF' }, 'money-value');
    const proto = client.add('syntax = "proto3"; package t; import "m/money.proto"; message Note { string id = 1; m.Money total = 2; }', { schemaType: 'PROTOBUF', references: [{ name: 'm/money.proto', subject: 'money-value', version: 1 }] });
    const badJson = client.add('{"type": "strnig"}', { schemaType: 'JSON' });
    const values = [json, proto, badJson].map((i) => frameForRegistry(i, Buffer.from('{}')));
    await remote.prefetch(values);
    const jsonWriter = remote.writer(json);
    if (!jsonWriter || typeof jsonWriter !== 'object' || !('codec' in jsonWriter) || jsonWriter.codec.schemaType !== 'JSON') throw new Error(`not a JSON Schema writer: ${JSON.stringify(jsonWriter)}`);
    expect(jsonWriter.codec.validate({ code: 'x', n: 1 })).toEqual([{ path: 'code', problem: 'must NOT have fewer than 2 characters' }]);
    expect(jsonWriter.codec.validate({ code: 'xy', n: 1.5 })).toEqual([{ path: 'n', problem: 'must be integer' }]);
    const protoWriter = remote.writer(proto);
    if (!protoWriter || typeof protoWriter !== 'object' || !('codec' in protoWriter) || protoWriter.codec.schemaType !== 'PROTOBUF') throw new Error(`not a Protobuf writer: ${JSON.stringify(protoWriter)}`);
    const written = protoWriter.codec.encode({ id: 'n', total: { units: '9007199254740993' } }, 't.Note');
    expect(protoWriter.codec.decode(written, DEFAULT_JSON_LIMITS)).toEqual({ name: 't.Note', value: { id: 'n', total: { units: '9007199254740993' } } });
    expect(remote.writer(badJson)).toEqual({ unreadable: expect.stringMatching(/^the registry's schema id \d+ is a JSON Schema that cannot be read here: JSON Schema id \d+ does not compile/) });
    expect(() => decodeEvent(registry, note, values[0])).toThrow(/a JSON schema under this id, not an Avro one/);
    expect(() => decodeEvent(registry, note, values[1])).toThrow(/a PROTOBUF schema under this id, not an Avro one/);
  });

  it('gives the id and writer of a subject\'s latest schema to write with, cached after the first lookup', async () => {
    const { client, remote } = setUp();
    await expect(remote.latestFor('notes-value')).rejects.toMatchObject({ failure: 'no-id', message: expect.stringMatching(/subject notes-value .* has no schema to write with/) });
    await expect(remote.latestSoon('notes-value')).rejects.toThrow(/has no schema to write with/); // a write looks it up again
    const v1 = client.add(JSON.stringify({ type: 'object' }), { schemaType: 'JSON' }, 'notes-value');
    // A write while the lookup is under way waits for it.
    const lookup = remote.latestFor('notes-value');
    await expect(remote.latestSoon('notes-value')).resolves.toMatchObject({ id: v1, writer: { codec: { schemaType: 'JSON', describe: `JSON Schema id ${v1}` } } });
    await expect(lookup).resolves.toMatchObject({ id: v1 });
    client.add(JSON.stringify({ type: 'object', required: ['a'] }), { schemaType: 'JSON' }, 'notes-value');
    client.down = true;
    expect(remote.latestSoon('notes-value')).toMatchObject({ id: v1 }); // cached: at once, while the registry is away
    const other = formatRegistry(options(), 'bigint', client);
    await expect(other.latestFor('notes-value')).rejects.toMatchObject({ failure: 'unavailable' });
    await expect(other.latestSoon('notes-value')).rejects.toThrow(/did not give the latest schema of subject notes-value: connect ECONNREFUSED/);
  });

});
