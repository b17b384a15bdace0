import { frameForRegistry, registryBodyOf, registryIdOf, startsAsRegistryFramed } from './registry-framing';

describe('the Schema Registry framing', () => {
  it('writes the magic byte, the id (4 bytes, big-endian) and the body, whatever the body is', () => {
    expect(frameForRegistry(0x01020304, Buffer.from('{}'))).toEqual(Buffer.from([0, 1, 2, 3, 4, 0x7b, 0x7d]));
    expect(frameForRegistry(258, Buffer.from([0, 0x0a, 0x00]))).toEqual(Buffer.from([0, 0, 0, 1, 2, 0, 0x0a, 0x00]));
  });

  it('reads back the id and the body, and nothing from a value too short or not framed', () => {
    const framed = frameForRegistry(258, Buffer.from([1, 2]));
    expect(registryIdOf(framed)).toBe(258);
    expect(registryBodyOf(framed)).toEqual(Buffer.from([1, 2]));
    expect(registryIdOf(Buffer.from([0xc3, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]))).toBeUndefined();
    expect(registryIdOf(Buffer.from([0, 0, 0]))).toBeUndefined();
    expect(registryIdOf(null)).toBeUndefined();
  });

  it('tells a value that starts as the framing does, even one too short to hold an id', () => {
    expect(startsAsRegistryFramed(Buffer.from([0]))).toBe(true);
    expect(startsAsRegistryFramed(Buffer.from('{}'))).toBe(false);
    expect(startsAsRegistryFramed(Buffer.alloc(0))).toBe(false);
    expect(startsAsRegistryFramed(null)).toBe(false);
  });
});
