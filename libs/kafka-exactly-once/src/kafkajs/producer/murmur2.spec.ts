import { randomBytes } from 'crypto';
import { murmur2 } from './kafkajs-internals';

/* eslint-disable @typescript-eslint/no-require-imports */
const kafkaJsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2') as (key: Buffer | string) => number;
/* eslint-enable @typescript-eslint/no-require-imports */

describe('murmur2: the partition of a keyed record', () => {
  it("gives the Java client's values (Kafka's own test of Utils.murmur2)", () => {
    const java: Array<[string, number]> = [
      ['21', -973932308],
      ['foobar', -790332482],
      ['a-little-bit-long-string', -985981536],
      ['a-little-bit-longer-string', -1486304829],
      ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
      ['abc', 479470107],
    ];
    for (const [key, hash] of java) expect([key, murmur2(Buffer.from(key))]).toEqual([key, hash]);
  });

  it("gives KafkaJS's values for keys of every length from 0 to 64 bytes, bytes of 0x80 and above included, and for strings", () => {
    for (let length = 0; length <= 64; length++) {
      for (let i = 0; i < 20; i++) {
        const key = randomBytes(length);
        expect(murmur2(key)).toBe(kafkaJsMurmur2(key));
      }
      const high = Buffer.alloc(length, 0xff);
      expect(murmur2(high)).toBe(kafkaJsMurmur2(high));
    }
    for (const key of ['', 'acct-17', 'é ключ 🔑']) expect(murmur2(key)).toBe(kafkaJsMurmur2(key));
  });
});
