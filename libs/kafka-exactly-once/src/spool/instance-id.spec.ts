import { mkdtempSync, readdirSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { INSTANCE_ID_FILE, INSTANCE_ID_PATTERN, spoolInstanceId } from './instance-id';

describe('spoolInstanceId', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keo-instance-'));
  });

  it('creates an id once and finds the same one on every later start', () => {
    const first = spoolInstanceId(dir);
    expect(first).toMatch(INSTANCE_ID_PATTERN);
    expect(spoolInstanceId(dir)).toBe(first);
    expect(readdirSync(dir)).toEqual([INSTANCE_ID_FILE]); // no temporary file left behind
  });

  it('gives two spool directories two ids', () => {
    expect(spoolInstanceId(dir)).not.toBe(spoolInstanceId(mkdtempSync(join(tmpdir(), 'keo-instance-'))));
  });

  it('creates the directory when it does not exist yet', () => {
    expect(spoolInstanceId(join(dir, 'nested', 'spool'))).toMatch(INSTANCE_ID_PATTERN);
  });

  it('refuses a file that does not hold an id, naming the file', () => {
    writeFileSync(join(dir, INSTANCE_ID_FILE), 'has spaces and / slashes');
    expect(() => spoolInstanceId(dir)).toThrow(new RegExp(`${INSTANCE_ID_FILE} does not hold a publisher instance id`));
  });
});
