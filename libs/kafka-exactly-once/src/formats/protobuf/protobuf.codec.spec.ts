import * as protobuf from 'protobufjs';
import { DecodeError } from '../../errors/decode.error';
import { buildProtobufSchema, decodeMessageIndexes, encodeMessageIndexes, MAX_MESSAGE_INDEXES, type ProtobufSchema } from './protobuf.codec';

const SHOP = `
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common/money.proto";

message Order {
  string order_id = 1;
  int64 amount = 2;
  uint64 big = 3;
  Status status = 4;
  repeated Line lines = 5;
  map<string, int32> counts = 6;
  oneof payment {
    string card = 7;
    Iban iban = 8;
  }
  google.protobuf.Timestamp placed_at = 9;
  bytes raw = 10;
  common.Money total = 11;

  enum Status { NEW = 0; PAID = 1; }
  message Line {
    string sku = 1;
    message Discount { int32 percent = 1; }
    message Tax { int32 basis_points = 1; }
    message Note { string text = 1; }
    Note note = 2;
  }
  message Iban { string number = 1; }
}

message Refund { string order_id = 1; }
`;

const MONEY = `
syntax = "proto3";
package common;
message Money { string currency = 1; sint64 units = 2; }
`;

function codec(text = SHOP, references = [{ name: 'common/money.proto', schema: MONEY }]): ProtobufSchema {
  const built = buildProtobufSchema(42, text, references);
  if (!('protobuf' in built)) throw new Error(JSON.stringify(built));
  return built.protobuf;
}

/** The body as protobufjs itself writes it, independently of the codec under test. */
function independentBody(message: string, value: Record<string, unknown>): Buffer {
  const root = new protobuf.Root();
  root.addJSON(protobuf.common.get('google/protobuf/timestamp.proto')!.nested!);
  protobuf.parse(MONEY, root, { keepCase: true });
  protobuf.parse(SHOP, root, { keepCase: true });
  const type = root.lookupType(message);
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}

describe('Confluent message indexes', () => {
  it('writes [0] as the single byte 0x00 and reads it back, the body right after', () => {
    expect(encodeMessageIndexes([0])).toEqual(Buffer.from([0x00]));
    expect(decodeMessageIndexes(Buffer.from([0x00, 0x0a, 0x01]), 1)).toEqual({ indexes: [0], bodyOffset: 1 });
  });

  it('writes a nested path as a zigzag count then zigzag indexes', () => {
    expect(encodeMessageIndexes([1, 0, 2])).toEqual(Buffer.from([0x06, 0x02, 0x00, 0x04]));
    expect(decodeMessageIndexes(Buffer.from([0x06, 0x02, 0x00, 0x04, 0xff]), 1)).toEqual({ indexes: [1, 0, 2], bodyOffset: 4 });
    expect(encodeMessageIndexes([1])).toEqual(Buffer.from([0x02, 0x02]));
    // An index of a varint of two bytes: 100 zigzags to 200 (0xc8 0x01).
    expect(encodeMessageIndexes([0, 100])).toEqual(Buffer.from([0x04, 0x00, 0xc8, 0x01]));
    expect(decodeMessageIndexes(Buffer.from([0x04, 0x00, 0xc8, 0x01]), 1).indexes).toEqual([0, 100]);
    // [0] written the long way (count 1, index 0), as some serializers do, reads as [0] too.
    expect(decodeMessageIndexes(Buffer.from([0x02, 0x00]), 1)).toEqual({ indexes: [0], bodyOffset: 2 });
  });

  it('refuses a count above the bound, a varint longer than 5 bytes, negative values and truncated indexes, naming the schema id', () => {
    const million = Buffer.from([0x80, 0x89, 0x7a]); // zigzag(10^6) = 2,000,000
    expect(() => decodeMessageIndexes(million, 7)).toThrow(DecodeError);
    expect(() => decodeMessageIndexes(million, 7)).toThrow(/schema id 7: 1000000 message indexes \(at most 100\)/);
    expect(() => decodeMessageIndexes(Buffer.from([0xca, 0x01]), 7)).toThrow(/101 message indexes/);
    expect(decodeMessageIndexes(Buffer.concat([Buffer.from([0xc8, 0x01]), Buffer.alloc(MAX_MESSAGE_INDEXES)]), 7).indexes).toHaveLength(100);
    expect(() => decodeMessageIndexes(Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), 7)).toThrow(/schema id 7: a varint longer than 5 bytes/);
    expect(() => decodeMessageIndexes(Buffer.from([0x06, 0x02, 0x00]), 7)).toThrow(/schema id 7: the bytes end within the message indexes \(index 3 of 3\)/);
    expect(() => decodeMessageIndexes(Buffer.from([0x80]), 7)).toThrow(/end within the message indexes \(count\)/);
    expect(() => decodeMessageIndexes(Buffer.alloc(0), 7)).toThrow(DecodeError);
    expect(() => decodeMessageIndexes(Buffer.from([0x01]), 7)).toThrow(/-1 message indexes/);
    expect(() => decodeMessageIndexes(Buffer.from([0x02, 0x03]), 7)).toThrow(/message index -2 is negative/);
    expect(() => encodeMessageIndexes([])).toThrow(RangeError);
    expect(() => encodeMessageIndexes(new Array(101).fill(0))).toThrow(RangeError);
    expect(() => encodeMessageIndexes([-1])).toThrow(RangeError);
  });
});

describe('Protobuf codec of a registry schema', () => {
  it('reads a body protobufjs wrote: int64 beyond 2^53 exact as strings, enums as names, nested, oneof, repeated, maps, Timestamp, bytes as base64, defaults', () => {
    const body = independentBody('shop.Order', {
      order_id: 'o-1',
      amount: '9007199254740993', // 2^53 + 1: a number would read 9007199254740992
      big: '18446744073709551615',
      status: 'PAID',
      lines: [{ sku: 'a', note: { text: 'gift' } }, { sku: 'b' }],
      counts: { a: 1, b: 2 },
      iban: { number: 'DE00' },
      placed_at: { seconds: '1700000000', nanos: 5 },
      raw: Buffer.from([1, 2, 3]),
      total: { currency: 'EUR', units: '-9223372036854775808' },
    });
    const { message, value } = codec().decode(Buffer.concat([Buffer.from([0]), body]));
    expect(message).toBe('shop.Order');
    expect(value).toEqual({
      order_id: 'o-1',
      amount: '9007199254740993',
      big: '18446744073709551615',
      status: 'PAID',
      lines: [{ sku: 'a', note: { text: 'gift' } }, { sku: 'b', note: null }],
      counts: { a: 1, b: 2 },
      iban: { number: 'DE00' },
      payment: 'iban',
      placed_at: { seconds: '1700000000', nanos: 5 },
      raw: 'AQID',
      total: { currency: 'EUR', units: '-9223372036854775808' },
    });
  });

  it('fills defaults for fields not on the wire, and leaves an unset oneof out', () => {
    const { value } = codec().decode(Buffer.concat([Buffer.from([0]), independentBody('shop.Order', { order_id: 'o-2' })]));
    expect(value).toEqual({ order_id: 'o-2', amount: '0', big: '0', status: 'NEW', lines: [], counts: {}, placed_at: null, raw: '', total: null });
  });

  it('reads the message the indexes name: a second top-level message, nested messages by their declared order (enums not counted)', () => {
    const c = codec();
    expect(c.decode(Buffer.concat([encodeMessageIndexes([1]), independentBody('shop.Refund', { order_id: 'r' })]))).toEqual({ message: 'shop.Refund', value: { order_id: 'r' } });
    expect(c.decode(Buffer.concat([encodeMessageIndexes([0, 1]), independentBody('shop.Order.Iban', { number: 'x' })])).message).toBe('shop.Order.Iban');
    expect(c.decode(Buffer.concat([encodeMessageIndexes([0, 0, 2]), independentBody('shop.Order.Line.Note', { text: 't' })]))).toEqual({ message: 'shop.Order.Line.Note', value: { text: 't' } });
  });

  it('refuses indexes that name no message, and a body that does not read, naming the schema id', () => {
    const c = codec();
    expect(() => c.decode(Buffer.concat([encodeMessageIndexes([2]), Buffer.from([0x0a, 0x00])]))).toThrow(/schema id 42: message indexes \[2\] name no message: the file declares 2 messages/);
    expect(() => c.decode(Buffer.concat([encodeMessageIndexes([0, 5]), Buffer.alloc(0)]))).toThrow(/\[0, 5\] name no message: message shop\.Order declares 2 messages at that level/);
    // Field 1 (order_id, length-delimited) says 10 bytes follow; one does.
    expect(() => c.decode(Buffer.from([0x00, 0x0a, 0x0a, 0x61]))).toThrow(DecodeError);
    expect(() => c.decode(Buffer.from([0x00, 0x0a, 0x0a, 0x61]))).toThrow(/Protobuf schema id 42 does not read as shop\.Order: /);
    // Field 2 (amount, int64) whose varint ends after three of its bytes.
    expect(() => c.decode(Buffer.from([0x00, 0x10, 0x80, 0x80, 0x80]))).toThrow(/schema id 42 does not read as shop\.Order: /);
    // A wire type protobuf does not have (7).
    expect(() => c.decode(Buffer.from([0x00, 0x0f, 0x01]))).toThrow(DecodeError);
  });

  it('writes what protobufjs reads back, by full, package-relative or no message name; bigints and long strings exact', () => {
    const c = codec();
    const first = c.encode(undefined, { order_id: 'w', amount: 2n ** 60n + 1n, status: 'PAID', card: '4111', counts: { z: 3 } });
    expect(first[0]).toBe(0);
    expect(c.decode(first).value).toMatchObject({ order_id: 'w', amount: '1152921504606846977', status: 'PAID', card: '4111', payment: 'card', counts: { z: 3 } });
    const nested = c.encode('shop.Order.Line.Note', { text: 'n' });
    expect(nested.subarray(0, 4)).toEqual(Buffer.from([0x06, 0x00, 0x00, 0x04]));
    expect(c.decode(nested)).toEqual({ message: 'shop.Order.Line.Note', value: { text: 'n' } });
    expect(c.decode(c.encode('Refund', { order_id: 'r' })).message).toBe('shop.Refund');
    expect(c.decode(c.encode('.shop.Refund', { order_id: 'r' })).message).toBe('shop.Refund');
    expect(() => c.encode('shop.Nothing', {})).toThrow(/declares no message shop\.Nothing \(its messages: shop\.Order, shop\.Refund\)/);
    expect(() => c.encode(undefined, 'text')).toThrow(/a message's value is an object, not string/);
  });

  it('reads a schema without a package, and imports that import others (references in any order)', () => {
    const a = 'syntax = "proto3"; package a; import "b.proto"; message A { b.B b = 1; }';
    const b = 'syntax = "proto3"; package b; import "c.proto"; message B { c.C c = 1; }';
    const c = 'syntax = "proto3"; package c; message C { int32 n = 1; }';
    const top = buildProtobufSchema(1, 'syntax = "proto3"; import "a.proto"; message Top { a.A a = 1; }', [{ name: 'c.proto', schema: c }, { name: 'a.proto', schema: a }, { name: 'b.proto', schema: b }]);
    if (!('protobuf' in top)) throw new Error(JSON.stringify(top));
    expect(top.protobuf.decode(top.protobuf.encode('Top', { a: { b: { c: { n: 7 } } } }))).toEqual({ message: 'Top', value: { a: { b: { c: { n: 7 } } } } });
  });

  it('resolves several well-known imports of one file (their google.protobuf namespace shared)', () => {
    const built = buildProtobufSchema(5, 'syntax = "proto3"; import "google/protobuf/timestamp.proto"; import "google/protobuf/duration.proto"; import "google/protobuf/wrappers.proto"; message M { google.protobuf.Timestamp t = 1; google.protobuf.Duration d = 2; google.protobuf.StringValue s = 3; }');
    if (!('protobuf' in built)) throw new Error(JSON.stringify(built));
    expect(built.protobuf.decode(built.protobuf.encode('M', { t: { seconds: 1 }, d: { seconds: '2', nanos: 3 }, s: { value: 'x' } })).value).toEqual({ t: { seconds: '1', nanos: 0 }, d: { seconds: '2', nanos: 3 }, s: { value: 'x' } });
  });

  it('is unreadable, saying why, for a file that does not parse, an import no reference gives, a type that does not resolve, or no message', () => {
    expect(buildProtobufSchema(3, 'syntax = "proto3"; message {')).toEqual({ unreadable: expect.stringMatching(/^Protobuf schema id 3 cannot be read here: /) });
    expect(buildProtobufSchema(3, SHOP, [])).toEqual({ unreadable: expect.stringMatching(/imports common\/money\.proto, which is neither among the schema's references nor a well-known type/) });
    expect(buildProtobufSchema(3, 'syntax = "proto3"; message M { Missing m = 1; }')).toEqual({ unreadable: expect.stringMatching(/no such Type or Enum 'Missing'/) });
    expect(buildProtobufSchema(3, 'syntax = "proto3"; enum E { A = 0; }')).toEqual({ unreadable: 'Protobuf schema id 3 declares no message' });
  });
});
