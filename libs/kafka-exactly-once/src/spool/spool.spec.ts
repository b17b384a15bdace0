import { appendFileSync, mkdtempSync, readdirSync, readFileSync, statSync, truncateSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { SpoolFullError } from '../errors/spool-full.error';
import { crc32c } from './crc32c';
import { REFUSED_QUARANTINE, Spool } from './spool';
import { QuarantinedRecord, readFrame, SpooledRecord } from './spool-record';

const record = (n: number, key = `k${n % 3}`): SpooledRecord => ({
  topic: 't',
  key: Buffer.from(key).toString('base64'),
  value: Buffer.from(`value-${n}`).toString('base64'),
  headers: { 'message-id': `m-${n}` },
  messageId: `m-${n}`,
  spooledAt: 1000 + n,
});

const open = (directory: string, maxBytes = 1 << 20) => new Spool({ directory, maxBytes, segmentBytes: 600 });

describe('CRC-32C', () => {
  it('matches the standard check value', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(Buffer.alloc(32))).toBe(0x8a9136aa);
  });
});

describe('Spool', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keo-spool-'));
    jest.spyOn(console, 'error').mockImplementation(() => undefined);
  });
  afterEach(() => jest.restoreAllMocks());

  it('keeps records across a reopen, in order, and forgets what Kafka acknowledged', async () => {
    const spool = open(dir);
    await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((n) => spool.append(record(n))));
    expect(readdirSync(dir).filter((f) => f.startsWith('segment-')).length).toBeGreaterThan(1); // rotated at 600 bytes
    spool.acknowledge(3);
    await spool.close();

    const reopened = open(dir);
    expect((await reopened.peek(100)).map((r) => r.messageId)).toEqual(['m-4', 'm-5', 'm-6', 'm-7', 'm-8']);
    expect(reopened.backlog(2000)).toMatchObject({ records: 5, oldestAgeMs: 996 });
    reopened.acknowledge(5);
    expect(reopened.isEmpty).toBe(true);
    await reopened.close();
    expect(await open(dir).peek(100)).toEqual([]);
  });

  it('tracks which keys wait, so later records of a key queue behind them', async () => {
    const spool = open(dir);
    await spool.append(record(1, 'acc-1'));
    await spool.append(record(2, 'acc-1'));
    expect(spool.hasKey('t', 'acc-1')).toBe(true);
    expect(spool.hasKey('t', 'acc-2')).toBe(false);
    spool.acknowledge(1);
    expect(spool.hasKey('t', 'acc-1')).toBe(true);
    spool.acknowledge(1);
    expect(spool.hasKey('t', 'acc-1')).toBe(false);
  });

  it('tells a waiting publish when the last spooled record of its key is acknowledged, or that it waited too long', async () => {
    const spool = open(dir);
    await Promise.all([record(1, 'acc-1'), record(2, 'acc-2'), record(3, 'acc-1')].map((r) => spool.append(r)));
    await expect(spool.keyDrained('t', 'acc-9', 10)).resolves.toBe(true); // nothing of it waits
    const acc1 = spool.keyDrained('t', 'acc-1', 60000);
    const acc2 = spool.keyDrained('t', 'acc-2', 60000);
    const tooLong = spool.keyDrained('t', 'acc-1', 20);
    await expect(tooLong).resolves.toBe(false);
    let acc1Done = false;
    void acc1.then(() => (acc1Done = true));
    await spool.acknowledge(2); // acc-1's first and acc-2's only record
    await expect(acc2).resolves.toBe(true);
    expect(acc1Done).toBe(false); // acc-1 still has a record waiting
    await spool.acknowledge(1);
    await expect(acc1).resolves.toBe(true);
    await spool.close();
  });

  it('lets the drainer read what is on disk while later appends are still being written', async () => {
    const spool = open(dir, 1 << 20);
    await spool.append(record(1));
    // Appends that keep coming (a new one each turn) must not hold the drainer back until they stop.
    let stop = false;
    const appending = (async () => {
      for (let n = 2; !stop; n++) await spool.append(record(n));
    })();
    const first = await spool.peek(1);
    stop = true;
    await appending;
    expect(first.map((r) => r.messageId)).toEqual(['m-1']);
    await spool.close();
  }, 5000);

  it('quarantines a torn tail and delivers the records before it', async () => {
    const spool = open(dir, 1 << 20);
    await spool.append(record(1));
    await spool.append(record(2));
    await spool.close();
    const segment = join(dir, readdirSync(dir).find((f) => f.startsWith('segment-')) as string);
    const size = statSync(segment).size;
    truncateSync(segment, size - 5); // a crash in the middle of the second write

    const reopened = open(dir);
    expect((await reopened.peek(10)).map((r) => r.messageId)).toEqual(['m-1']);
    const quarantined = readdirSync(dir).filter((f) => f.startsWith('quarantine-'));
    expect(quarantined).toHaveLength(1);
    expect(statSync(join(dir, quarantined[0])).size).toBeGreaterThan(0);
    // The spool goes on: new records append after the last good one.
    await reopened.append(record(3));
    await reopened.close();
    expect((await open(dir).peek(10)).map((r) => r.messageId)).toEqual(['m-1', 'm-3']);
  });

  it('quarantines a corrupt record (bad checksum) instead of crashing', async () => {
    const spool = open(dir);
    await spool.append(record(1));
    await spool.close();
    const segment = join(dir, readdirSync(dir).find((f) => f.startsWith('segment-')) as string);
    appendFileSync(segment, Buffer.from([0, 0, 0, 4, 1, 2, 3, 4, 0x7b, 0x7d, 0x7b, 0x7d]));
    const reopened = open(dir);
    expect((await reopened.peek(10)).map((r) => r.messageId)).toEqual(['m-1']);
    const [quarantine] = readdirSync(dir).filter((f) => f.startsWith('quarantine-'));
    expect(readFileSync(join(dir, quarantine))).toEqual(Buffer.from([0, 0, 0, 4, 1, 2, 3, 4, 0x7b, 0x7d, 0x7b, 0x7d]));
  });

  it('refuses appends past its size limit and drops nothing', async () => {
    const spool = open(dir, 300);
    await spool.append(record(1));
    await expect(spool.append(record(2))).resolves.toBeUndefined();
    await expect(spool.append(record(3))).rejects.toThrow(SpoolFullError);
    expect((await spool.peek(10)).map((r) => r.messageId)).toEqual(['m-1', 'm-2']);
  });

  it('moves a refused record to the quarantine file with its reason, and the records behind it move on', async () => {
    const spool = open(dir);
    await Promise.all([1, 2, 3].map((n) => spool.append(record(n))));
    expect(spool.quarantineOldest('MESSAGE_TOO_LARGE: too big', 5000).messageId).toBe('m-1');
    expect((await spool.peek(10)).map((r) => r.messageId)).toEqual(['m-2', 'm-3']);
    expect(spool.quarantine()).toMatchObject({ records: 1, lastReason: 'MESSAGE_TOO_LARGE: too big' });
    await spool.close();

    // Kept across a restart: the record is not replayed, the quarantine still counts it.
    const reopened = open(dir);
    expect((await reopened.peek(10)).map((r) => r.messageId)).toEqual(['m-2', 'm-3']);
    expect(reopened.quarantine()).toMatchObject({ records: 1, lastReason: 'MESSAGE_TOO_LARGE: too big' });
    const frame = readFrame(readFileSync(join(dir, REFUSED_QUARANTINE)), 0);
    expect(frame.kind === 'record' && (frame.record as QuarantinedRecord)).toEqual({ ...record(1), quarantine: { reason: 'MESSAGE_TOO_LARGE: too big', at: 5000 } });
  });

  it('cuts a torn quarantine write off at restart; the record is still in the spool', async () => {
    const spool = open(dir);
    await spool.append(record(1));
    await spool.append(record(2));
    spool.quarantineOldest('INVALID_RECORD');
    await spool.close();
    appendFileSync(join(dir, REFUSED_QUARANTINE), Buffer.from([0, 0, 9, 9, 1])); // a crash in the middle of the next one
    const reopened = open(dir);
    expect(reopened.quarantine().records).toBe(1);
    expect(statSync(join(dir, REFUSED_QUARANTINE)).size).toBeGreaterThan(0);
    expect((await reopened.peek(10)).map((r) => r.messageId)).toEqual(['m-2']);
    reopened.quarantineOldest('INVALID_RECORD again');
    expect(open(dir).quarantine()).toMatchObject({ records: 2, lastReason: 'INVALID_RECORD again' });
  });
});
