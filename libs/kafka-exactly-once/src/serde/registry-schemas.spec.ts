import { SchemaRegistryError } from '../errors/schema-registry.error';
import { DecodeError } from '../errors/decode.error';
import { frameForRegistry, registryIdOf, RegistrySchemas } from './registry-schemas';
import { SchemaRegistry } from './schema-registry';
import { decodeEvent, encodeSingleObject } from './single-object.codec';

const V1 = { type: 'record', name: 'Note', namespace: 't', fields: [{ name: 'id', type: 'string' }] };
const V2 = { type: 'record', name: 'Note', namespace: 't', fields: [{ name: 'id', type: 'string' }, { name: 'n', type: 'long', default: 0 }] };

/** A registry client answering from memory, as @kafkajs/confluent-schema-registry would, with its errors. */
function fakeClient(local: SchemaRegistry) {
  const subjects = new Map<string, number[]>();
  const texts = new Map<number, string>();
  let nextId = 1;
  let down = false;
  const status = (code: number) => Object.assign(new Error(`status ${code}`), { status: code });
  const client = {
    calls: 0,
    set down(value: boolean) {
      down = value;
    },
    async getSchema(id: number) {
      client.calls++;
      if (down) throw new Error('connect ECONNREFUSED');
      const text = texts.get(id);
      if (!text) throw status(404);
      return SchemaRegistry.fromSchemas([{ schema: text }]).current(JSON.parse(text).namespace + '.' + JSON.parse(text).name).type;
    },
    async getRegistryIdBySchema(subject: string, schema: { schema: string }) {
      client.calls++;
      if (down) throw new Error('connect ECONNREFUSED');
      const id = (subjects.get(subject) ?? []).find((i) => texts.get(i) === schema.schema);
      if (id === undefined) throw Object.assign(new Error('Subject not found'), { name: 'ConfluentSchemaRegistryError' });
      return id;
    },
    async register(schema: { schema: string }, { subject }: { subject: string }) {
      client.calls++;
      if (down) throw new Error('connect ECONNREFUSED');
      const id = nextId++;
      texts.set(id, schema.schema);
      subjects.set(subject, [...(subjects.get(subject) ?? []), id]);
      return { id };
    },
    async getLatestSchemaId(subject: string) {
      client.calls++;
      if (down) throw new Error('connect ECONNREFUSED');
      const ids = subjects.get(subject);
      if (!ids) throw status(404);
      return ids[ids.length - 1];
    },
  };
  void local;
  return client;
}

const options = (overrides: Partial<ConstructorParameters<typeof RegistrySchemas>[0]> = {}) => ({
  url: 'http://registry.test',
  subjectNameStrategy: 'topic' as const,
  autoRegister: false,
  requestTimeoutMs: 1000,
  ...overrides,
});

describe('the Schema Registry as the library uses it', () => {
  const local = SchemaRegistry.fromSchemas([{ schema: V1, file: 'note.v1.avsc' }, { schema: V2, file: 'note.v2.avsc' }]);
  const [v1] = [SchemaRegistry.fromSchemas([{ schema: V1, file: 'note.v1.avsc' }]).current('t.Note')];
  const v2 = local.current('t.Note');

  it('names subjects by the configured strategy', () => {
    const client = fakeClient(local);
    expect(new RegistrySchemas(options(), 'bigint', client).subjectOf('orders', 't.Note')).toBe('orders-value');
    expect(new RegistrySchemas(options({ subjectNameStrategy: 'record' }), 'bigint', client).subjectOf('orders', 't.Note')).toBe('t.Note');
    expect(new RegistrySchemas(options({ subjectNameStrategy: 'topic-record' }), 'bigint', client).subjectOf('orders', 't.Note')).toBe('orders-t.Note');
  });

  it('tells the framing apart by its first bytes', () => {
    expect(registryIdOf(frameForRegistry(258, Buffer.from([1, 2])))).toBe(258);
    expect(registryIdOf(encodeSingleObject(v2, { id: 'x', n: 1n }))).toBeUndefined();
    expect(registryIdOf(Buffer.from([0, 0, 0]))).toBeUndefined();
    expect(registryIdOf(null)).toBeUndefined();
  });

  it('reads a value of either framing on one topic, resolving an older writer to the reader', async () => {
    const client = fakeClient(local);
    const remote = new RegistrySchemas(options(), 'bigint', client);
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
    const remote = new RegistrySchemas(options(), 'bigint', client);
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
    const remote = new RegistrySchemas(options(), 'bigint', client);
    expect(() => remote.idNow('orders-value', v2)).toThrow(/no id of t.Note under subject orders-value has come/);
    await expect(remote.idFor('orders-value', v2)).rejects.toMatchObject({ failure: 'no-id', message: expect.stringMatching(/registering at run time is off: register it at deploy time \(npx kafka-eo schemas register\)/) });
    // The last failure is what a write says now.
    expect(() => remote.idNow('orders-value', v2)).toThrow(/registering at run time is off/);
    const id = await remote.register('orders-value', v2);
    expect(await remote.idFor('orders-value', v2)).toBe(id);
    expect(remote.idNow('orders-value', v2)).toBe(id);
    client.down = true;
    expect(remote.idNow('orders-value', v2)).toBe(id); // cached: writes go on while the registry is away

    const registering = new RegistrySchemas(options({ autoRegister: true }), 'bigint', fakeClient(local));
    expect(await registering.idFor('payments-value', v2)).toBeGreaterThan(0);
  });

  it('gives the latest schema of a subject, or none', async () => {
    const client = fakeClient(local);
    const remote = new RegistrySchemas(options(), 'bigint', client);
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
      await new RegistrySchemas(options({ url: server.url, auth: { username: 'key', password: 'secret' } }), 'bigint').prefetch([frameForRegistry(1, Buffer.alloc(0))]);
      let n = 0;
      const bearer = new RegistrySchemas(options({ url: server.url, auth: { bearerToken: async () => `token-${++n}` } }), 'bigint');
      await bearer.prefetch([frameForRegistry(1, Buffer.alloc(0))]);
      expect(server.seen).toEqual([`Basic ${Buffer.from('key:secret').toString('base64')}`, 'Bearer token-1']);
    } finally {
      await server.close();
    }
  });
});
