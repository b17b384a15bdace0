import { mkdtempSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { DecodeError } from '../../errors/decode.error';
import { EventValidationError } from '../../errors/event-validation.error';
import { EventCodec } from './event-codec';
import { SchemaRegistry } from './schema-registry';
import { decodeSingleObject } from './single-object.codec';

const V1 = { type: 'record', name: 'PaymentRequested', namespace: 'com.example', fields: [{ name: 'paymentId', type: 'string' }, { name: 'amountCents', type: 'long' }] };
const V2 = { ...V1, fields: [...V1.fields, { name: 'currency', type: 'string', default: 'EUR' }] };

function directory(files: Record<string, object>): string {
  const dir = mkdtempSync(join(tmpdir(), 'keo-codec-'));
  for (const [name, schema] of Object.entries(files)) writeFileSync(join(dir, name), JSON.stringify(schema));
  return dir;
}

describe('EventCodec: the wire format for producers and readers outside the library', () => {
  const dir = directory({ 'payment.v1.avsc': V1, 'payment.v2.avsc': V2 });
  const codec = EventCodec.fromDirectory(dir);

  it('writes what the consumers read: the current version, single-object encoded, with message-id and event-type headers', () => {
    const message = codec.encode('com.example.PaymentRequested', { paymentId: 'p-1', amountCents: 250n, currency: 'USD' }, { key: 'acct-1', messageId: 'p-1', headers: { traceparent: '00-abc-def-01' } });
    expect(message.key).toBe('acct-1');
    expect(message.headers).toEqual({ traceparent: '00-abc-def-01', 'message-id': 'p-1', 'event-type': 'com.example.PaymentRequested' });
    expect(message.value.subarray(0, 2)).toEqual(Buffer.from([0xc3, 0x01]));
    // The library's own decoder (what a handler gets) reads it.
    const registry = SchemaRegistry.fromDirectory(dir);
    expect({ ...(decodeSingleObject(registry, registry.current('com.example.PaymentRequested'), message.value) as object) }).toEqual({ paymentId: 'p-1', amountCents: 250n, currency: 'USD' });
    const decoded = codec.decode(message.value);
    expect({ ...decoded, event: { ...(decoded.event as object) } }).toEqual({ event: { paymentId: 'p-1', amountCents: 250n, currency: 'USD' }, schema: 'com.example.PaymentRequested', writtenWith: 'payment.v2.avsc' });
  });

  it('gives each event a UUIDv7 message id unless one is given, and lets a given header not override the codec\'s', () => {
    const a = codec.encode('com.example.PaymentRequested', { paymentId: 'p', amountCents: 1n }, { key: 'k', headers: { 'message-id': 'forged' } });
    const b = codec.encode('com.example.PaymentRequested', { paymentId: 'p', amountCents: 1n }, { key: 'k' });
    expect(a.headers['message-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(a.headers['message-id']).not.toBe(b.headers['message-id']);
  });

  it('reads a record of an older version as the current one (Avro schema resolution)', () => {
    const old = EventCodec.fromDirectory(directory({ 'payment.v1.avsc': V1 })).encode('com.example.PaymentRequested', { paymentId: 'p-0', amountCents: 5n }, { key: 'k' });
    const decoded = codec.decode<Record<string, unknown>>(old.value);
    expect({ ...decoded.event }).toEqual({ paymentId: 'p-0', amountCents: 5n, currency: 'EUR' });
    expect(decoded.writtenWith).toBe('payment.v1.avsc');
  });

  it('refuses, encoding nothing: an invalid event (naming the field), an unknown schema, a missing key or message id', () => {
    expect(() => codec.encode('com.example.PaymentRequested', { paymentId: 'p' }, { key: 'k' })).toThrow(EventValidationError);
    expect(() => codec.encode('com.example.PaymentRequested', { paymentId: 'p' }, { key: 'k' })).toThrow(/amountCents/);
    expect(() => codec.encode('com.example.Nope', {}, { key: 'k' })).toThrow(/Nope/);
    expect(() => codec.encode('com.example.PaymentRequested', { paymentId: 'p', amountCents: 1n }, { key: '' })).toThrow(/"key" must be a non-empty string/);
    expect(() => codec.encode('com.example.PaymentRequested', { paymentId: 'p', amountCents: 1n }, undefined as never)).toThrow(/"key"/);
    expect(() => codec.encode('com.example.PaymentRequested', { paymentId: 'p', amountCents: 1n }, { key: 'k', messageId: '' })).toThrow(/"messageId"/);
  });

  it('refuses to read what is not its format: no value, foreign bytes, a schema not in the directory', () => {
    expect(() => codec.decode(null)).toThrow(DecodeError);
    expect(() => codec.decode(Buffer.from('{"paymentId":"p"}'))).toThrow(/not Avro single-object encoded/);
    const other = EventCodec.fromDirectory(directory({ 'other.avsc': { type: 'record', name: 'Other', fields: [{ name: 'x', type: 'int' }] } })).encode('Other', { x: 1 }, { key: 'k' });
    expect(() => codec.decode(other.value)).toThrow(expect.objectContaining({ kind: 'unknown-schema' }));
  });
});
