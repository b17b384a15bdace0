import { eventSteps, type RelayBatchTimes, stepPercentiles } from './relay-steps';

const times: RelayBatchTimes = { batch: 7n, messageIds: ['a'], markedFrom: 1010, markedAt: 1014, sendFrom: 1020, sentAt: 1031, committedAt: 1036 };

describe("an outbox event's steps", () => {
  it('splits its time from the commit to the reader into the relay\'s steps, which add up to it', () => {
    const steps = eventSteps(times, 1000, 1060)!;
    expect(steps).toEqual({ pickUp: 10, mark: 4, queue: 6, send: 11, commit: 5, visible: 24, total: 60 });
    expect(steps.pickUp + steps.mark + steps.queue + steps.send + steps.commit + steps.visible).toBe(steps.total);
  });

  it('counts no negative pick-up for an event the relay saw before its writer had the answer to its COMMIT', () => {
    expect(eventSteps(times, 1012, 1060)).toMatchObject({ pickUp: 0, total: 48 });
  });

  it('has none for a batch a crash left given out (no marking times)', () => {
    expect(eventSteps({ ...times, markedFrom: undefined, markedAt: undefined }, 1000, 1060)).toBeUndefined();
  });

  it('gives each step\'s percentiles by nearest rank', () => {
    const events = Array.from({ length: 100 }, (_, i) => eventSteps({ ...times, committedAt: 1036 + i }, 1000, 1100 + i)!);
    const summary = stepPercentiles(events)!;
    expect(summary.commit).toEqual({ p50: 55, p90: 95, p99: 104 });
    expect(summary.visible).toEqual({ p50: 64, p90: 64, p99: 64 });
    expect(stepPercentiles([])).toBeUndefined();
  });
});
