import { mkdtempSync, readFileSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { StepLog, stepClock } from './step-log';

describe('StepLog', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'step-log-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('appends one JSON line per unit, written when flushed or closed, after what the file held', () => {
    const path = join(dir, 'steps.ndjson');
    const log = new StepLog(path);
    const t = stepClock();
    log.unit('payments', 3, '10', '19', 10, { fetched: t, started: t + 1, claimed: t + 2, committed: t + 9 });
    log.close();
    const again = new StepLog(path);
    again.unit('payments', 4, '0', '0', 1, { fetched: t, started: t });
    again.close();
    const lines = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { topic: 'payments', partition: 3, first: '10', last: '19', count: 10, fetched: t, started: t + 1, claimed: t + 2, committed: t + 9 },
      { topic: 'payments', partition: 4, first: '0', last: '0', count: 1, fetched: t, started: t },
    ]);
  });

  it('writes nothing before a flush, and a unit logged after a flush is in the next one', () => {
    const path = join(dir, 'steps.ndjson');
    const log = new StepLog(path);
    log.unit('t', 0, '1', '1', 1, { fetched: 1, started: 2 });
    expect(() => readFileSync(path)).toThrow();
    log.flush();
    log.unit('t', 0, '2', '2', 1, { fetched: 3, started: 4 });
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(1);
    log.close();
    expect(readFileSync(path, 'utf8').trim().split('\n')).toHaveLength(2);
  });

  it('tells time in epoch milliseconds', () => {
    expect(Math.abs(stepClock() - Date.now())).toBeLessThan(1000);
  });
});
