import { logLevel } from 'kafkajs';
import { createKafkaClient } from './client';
import { offsetFetchV7, StableOffsets } from './stable-offsets';

describe('StableOffsets', () => {
  it('reaches the KafkaJS internals it needs (kafkajs is pinned; this fails if they move)', () => {
    expect(() => new StableOffsets(createKafkaClient({ brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING }))).not.toThrow();
  });

  it('encodes OffsetFetch v7 with require_stable, and decodes its answer', async () => {
    const { request, response } = offsetFetchV7('g', 't', [0, 3]);
    const bytes: Buffer = ((await request.encode()) as { buffer: Buffer }).buffer;
    // header tagged fields, "g", one topic "t", partitions 0 and 3, tagged fields, require_stable, tagged fields
    expect([...bytes]).toEqual([0, 2, 0x67, 2, 2, 0x74, 3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 1, 0]);
    const answer = Buffer.from([
      0, 0, 0, 0, 0, // header tagged fields, throttle time
      2, 2, 0x74, // one topic "t"
      2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 42, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, // partition 3, offset 42, epoch -1, metadata "", no error, tags
      0, // topic tags
      0, 0, 0, // error code, tags
    ]);
    expect(await response.decode(answer)).toEqual({ errorCode: 0, answers: [{ partition: 3, offset: 42n, errorCode: 0 }] });
  });
});
