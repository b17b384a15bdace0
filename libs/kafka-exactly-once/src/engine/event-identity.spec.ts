import { Logger } from '@nestjs/common';
import { IdempotentHandler } from '../decorators/idempotent-handler.decorator';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { resolveOptions } from '../options/resolve-options';
import { eventKeyDigest, eventKeyIdentity, eventKeySource, messageIdFromProblem } from './event-identity';
import type { HandlerDefinition } from './handler-definition';
import type { KeyedRecord } from '../interfaces/record-info.interface';
import { keyedRecord, UnitReading } from './record-reading';
import { coordinatesDigest, identify, outputIdSeed, sha256Hex } from './record-identity';

describe('event identity (messageIdFrom)', () => {
  const record = () => ({ topic: 'payments', partition: 0, offset: '5', key: 'acct-1', keyBytes: Buffer.from('acct-1'), headers: {}, timestamp: '0' });
  const keyOf = (from: Parameters<typeof eventKeySource>[0], event: unknown) => eventKeySource(from).keyOf(event, record);

  it('refuses at boot what is neither a field path nor a function, naming the option', () => {
    expect(messageIdFromProblem('paymentId')).toBeUndefined();
    expect(messageIdFromProblem('order.id')).toBeUndefined();
    expect(messageIdFromProblem((e: { id: string }) => e.id)).toBeUndefined();
    for (const bad of ['', 'a..b', '.a', 'a.', ' a', 'a. b', 'x'.repeat(1001), Array(33).fill('a').join('.')]) expect([bad, messageIdFromProblem(bad)]).toEqual([bad, expect.any(String)]);
    for (const bad of [null, 5, true, {}, ['a']]) expect(messageIdFromProblem(bad)).toMatch(/field path .* or a function/);
    expect(() => IdempotentHandler({ topic: 't', messageIdFrom: '' })).toThrow(/"messageIdFrom" must be a field path/);
    expect(() => IdempotentHandler({ topic: 't', messageIdFrom: 7 as never })).toThrow(/"messageIdFrom" must be a field path/);
    const base = { kafka: { clientId: 'c', brokers: ['x:1'] }, groupId: 'g', transactionalIdPrefix: 'p' };
    expect(() => resolveOptions({ ...base, topics: { orders: { format: 'json', messageIdFrom: 'a..b' } } })).toThrow(InvalidOptionsError);
    expect(() => resolveOptions({ ...base, topics: { orders: { format: 'json', messageIdFrom: 'a..b' } } })).toThrow(/topics\["orders"\]\.messageIdFrom/);
    expect(() => resolveOptions({ ...base, topics: { orders: { format: 'json', messageIdFrom: 'order.id' } } })).not.toThrow();
  });

  it('reads the key from a field path: strings as UTF-8, numbers and bigints as their decimal text', () => {
    expect(keyOf('paymentId', { paymentId: 'p-1' })).toEqual({ key: Buffer.from('p-1') });
    expect(keyOf('order.id', { order: { id: 'o-ü' } })).toEqual({ key: Buffer.from('o-ü', 'utf8') });
    expect(keyOf('items.0.sku', { items: [{ sku: 's' }] })).toEqual({ key: Buffer.from('s') });
    expect(keyOf('n', { n: 42 })).toEqual({ key: Buffer.from('42') });
    expect(keyOf('n', { n: '42' })).toEqual({ key: Buffer.from('42') }); // a number and its text are one key
    expect(keyOf('n', { n: 12345678901234567890n })).toEqual({ key: Buffer.from('12345678901234567890') });
  });

  it('gives no key, with the reason, for a missing field or a value that is not a usable key', () => {
    expect(keyOf('paymentId', {})).toEqual({ problem: 'the event has no field paymentId' });
    expect(keyOf('order.id', { order: null })).toEqual({ problem: 'the event has no field order.id' });
    expect(keyOf('order.id', { order: 'flat' })).toEqual({ problem: 'the event has no field order.id' });
    expect(keyOf('paymentId', null)).toEqual({ problem: 'the event has no field paymentId' });
    const values: Array<[unknown, RegExp]> = [
      ['', /an empty string/],
      [null, /null/],
      [undefined, /undefined/],
      [true, /boolean/],
      [NaN, /NaN/],
      [Infinity, /Infinity/],
      [{ id: 1 }, /an object/],
      [['a'], /an array/],
      [Buffer.alloc(0), /no bytes/],
    ];
    for (const [value, reason] of values) expect(keyOf('id', { id: value })).toEqual({ problem: expect.stringMatching(reason) });
  });

  it('takes bytes (a Buffer, a Uint8Array: an Avro bytes field, the record\'s keyBytes) as the key\'s own bytes', () => {
    expect(keyOf('id', { id: Buffer.from([0xff, 0x00, 0xfe]) })).toEqual({ key: Buffer.from([0xff, 0x00, 0xfe]) });
    expect(keyOf('id', { id: new Uint8Array([1, 2]) })).toEqual({ key: Buffer.from([1, 2]) });
    expect(keyOf('id', { id: Buffer.from('p-1') })).toEqual(keyOf('id', { id: 'p-1' })); // bytes and their UTF-8 text: one key
  });

  it('gives a messageIdFrom function the record key\'s exact bytes: two binary keys that read alike as text stay two keys', () => {
    // Two keys that are not UTF-8 and differ: their text is the same (each invalid byte reads as U+FFFD).
    const keys = [Buffer.from([0x6b, 0xff]), Buffer.from([0x6b, 0xfe])];
    const records = keys.map((key, n) => keyedRecord('payments', 0, { offset: String(n), key, value: null, timestamp: '0', headers: {}, attributes: 0, size: 0 } as never));
    expect(records[0].key).toBe(records[1].key);
    const byBytes = eventKeySource((_event: unknown, r: KeyedRecord) => r.keyBytes);
    const [a, b] = records.map((r) => byBytes.keyOf({}, () => r));
    expect(a).toEqual({ key: keys[0] });
    expect(b).toEqual({ key: keys[1] });
    // A copy: what the function does with it never changes the record's key.
    records[0].keyBytes![0] = 0;
    expect(keys[0][0]).toBe(0x6b);
    expect(keyedRecord('payments', 0, { offset: '9', key: null, value: null, timestamp: '0', headers: {}, attributes: 0, size: 0 } as never)).toMatchObject({ key: null, keyBytes: null });
  });

  it('never reaches a prototype: only the event\'s own fields are read', () => {
    expect(keyOf('constructor.name', {})).toEqual({ problem: 'the event has no field constructor.name' });
    expect(keyOf('__proto__', {})).toEqual({ problem: 'the event has no field __proto__' });
    expect(keyOf('toString', Object.create({ toString: 'inherited' }))).toEqual({ problem: 'the event has no field toString' });
    // A field of that name the event itself has is read (JSON reads such keys as own fields).
    expect(keyOf('constructor', JSON.parse('{"constructor":"c-1"}'))).toEqual({ key: Buffer.from('c-1') });
  });

  it('calls a function with the event and the record; a throw or an unusable answer gives no key', () => {
    const seen: unknown[] = [];
    expect(
      keyOf((event: { a: string }, r) => {
        seen.push(r);
        return `${event.a}:${r.key}`;
      }, { a: 'x' }),
    ).toEqual({ key: Buffer.from('x:acct-1') });
    expect(seen).toEqual([record()]);
    expect(keyOf(() => {
      throw new Error('boom');
    }, {})).toEqual({ problem: 'the messageIdFrom function threw: boom' });
    expect(keyOf(() => undefined, {})).toEqual({ problem: expect.stringMatching(/returned undefined/) });
    expect(keyOf(() => ({}), {})).toEqual({ problem: expect.stringMatching(/returned an object/) });
  });

  it('hashes a key of any length and keeps only a bounded text of it', () => {
    const huge = 'k'.repeat(5_000_000);
    const { key } = keyOf('id', { id: huge }) as { key: Buffer };
    const id = eventKeyIdentity('payments', key);
    expect(id.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(id.displayId.length).toBeLessThan(200);
    expect(id.displayId).toMatch(/^sha256:[0-9a-f]{64} \(5000000 bytes, starts "k+"\)$/);
    expect(outputIdSeed(id)).toBe(`\u0000event-key:${id.scope}\u0000${id.digest}`);
    // The same key under another scope (another topic) seeds other output ids.
    expect(outputIdSeed({ ...id, scope: 'other-topic' })).not.toBe(outputIdSeed(id));
    // Two keys that share a long prefix are two identities.
    expect(eventKeyDigest(Buffer.from(`${huge}a`))).not.toBe(eventKeyDigest(Buffer.from(`${huge}b`)));
  });

  it('lives in a namespace of its own: no message-id header and no coordinates reach an event key\'s identity', () => {
    const key = Buffer.from('payments/0/5');
    const byEvent = eventKeyIdentity('payments', key);
    const byHeader = identify('payments', 0, { offset: '9', headers: { 'message-id': key } }, 'topic');
    const byCoordinates = identify('payments', 0, { offset: '5', headers: {} }, 'topic');
    expect(byEvent).toMatchObject({ kind: 'event-key', scope: 'payments', displayId: 'payments/0/5' });
    expect(new Set([byEvent.digest, byHeader.digest, byCoordinates.digest]).size).toBe(3);
    expect(byEvent.digest).not.toBe(sha256Hex(key));
    expect(byEvent.digest).not.toBe(coordinatesDigest('payments/0/5'));
    // Nor do the outputs' ids of the three meet.
    expect(new Set([outputIdSeed(byEvent), outputIdSeed(byHeader), outputIdSeed(byCoordinates)]).size).toBe(3);
  });

  describe('in a unit of work', () => {
    const reader = (decode: (bytes: Buffer | null) => unknown) =>
      ({
        format: 'json',
        describe: 'JSON',
        decode: (bytes: Buffer | null) => ({ event: decode(bytes) }),
        validate: async (event: unknown) => event,
        read: async () => undefined,
      }) as unknown as HandlerDefinition['reader'];
    const chunkRecord = (offset: string, value: string | null, messageId?: string) => {
      const message = { offset, key: Buffer.from('k'), value: value === null ? null : Buffer.from(value), timestamp: '0', headers: messageId ? { 'message-id': Buffer.from(messageId) } : {}, attributes: 0, size: 0 } as never;
      return { message, offset, id: identify('payments', 0, message, 'topic') };
    };

    it('gives a record without a header its event key; one with a header keeps it; one it cannot decode or key keeps its coordinates', () => {
      let decodes = 0;
      const handler = {
        name: 'Payments.on',
        reader: reader((bytes) => {
          decodes++;
          const parsed = JSON.parse(bytes!.toString());
          return parsed;
        }),
        messageIdFrom: eventKeySource('paymentId'),
        retry: { attempts: 1 },
      } as unknown as HandlerDefinition;
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      const logger = new Logger('test');
      const reading = new UnitReading({ handler, options: { consumer: { heartbeatInterval: 1000 } } as never, heartbeat: async () => undefined, topic: 'payments', partition: 0 }, logger);
      const records = [
        chunkRecord('1', '{"paymentId":"p-1"}'),
        chunkRecord('2', '{"paymentId":"p-1"}'),
        chunkRecord('3', '{"paymentId":"p-1"}', 'header-id'),
        chunkRecord('4', 'not json'),
        chunkRecord('5', '{"other":1}'),
        chunkRecord('6', '{"other":2}'),
      ];
      reading.identify(records);
      expect(records.map((r) => r.id.kind)).toEqual(['event-key', 'event-key', 'message-id', 'coordinates', 'coordinates', 'coordinates']);
      expect(records[0].id.digest).toBe(records[1].id.digest); // the same event twice: one identity
      expect(records[0].id.digest).toBe(eventKeyDigest(Buffer.from('p-1')));
      expect(records[3].id.displayId).toBe('payments/0/4');
      // Warned once per handler, naming why.
      expect(warn.mock.calls.filter(([m]) => String(m).includes('messageIdFrom'))).toEqual([[expect.stringMatching(/the event has no field paymentId/)]]);
      warn.mockRestore();
      // Decoded once: reading the records afterwards decodes nothing again.
      const before = decodes;
      return Promise.all(records.filter((r) => r.id.kind !== 'message-id').map((r) => reading.read(r))).then((reads) => {
        expect(decodes).toBe(before);
        expect(reads.map((r) => r.ok)).toEqual([true, true, false, true, true]);
      });
    });
  });
});
