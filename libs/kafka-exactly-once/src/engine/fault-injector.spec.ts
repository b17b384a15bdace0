import { FaultInjector } from './fault-injector';

describe('FaultInjector', () => {
  let kill: jest.SpyInstance;

  beforeEach(() => {
    kill = jest.spyOn(process, 'kill').mockImplementation(() => true);
    jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  });

  afterEach(() => jest.restoreAllMocks());

  it('does nothing when unset', () => {
    const faults = new FaultInjector(undefined);
    for (let i = 0; i < 5; i++) faults.reach('after-db-commit');
    expect(kill).not.toHaveBeenCalled();
  });

  it('kills on the n-th time the point is reached, and only then', () => {
    const faults = new FaultInjector('after-db-commit:3');
    faults.reach('after-db-commit');
    faults.reach('mid-chunk');
    faults.reach('after-db-commit');
    expect(kill).not.toHaveBeenCalled();
    faults.reach('after-db-commit');
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGKILL');
    faults.reach('after-db-commit');
    expect(kill).toHaveBeenCalledTimes(1);
  });

  it('freezes itself with SIGSTOP when asked to stall', () => {
    const faults = new FaultInjector('before-kafka-commit:1:stop');
    faults.reach('before-kafka-commit');
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGSTOP');
  });

  it('blocks the process for the given time when asked to delay, without a signal', () => {
    const faults = new FaultInjector('after-db-commit:1:delay=50');
    const started = Date.now();
    faults.reach('after-db-commit');
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(kill).not.toHaveBeenCalled();
  });

  it('makes the step throw from the n-th time on when asked to fail, without a signal', () => {
    const faults = new FaultInjector('hanging-read:2:fail');
    faults.reach('hanging-read');
    for (let i = 0; i < 3; i++) expect(() => faults.reach('hanging-read')).toThrow('fault injection: a failure at hanging-read');
    faults.reach('mid-chunk');
    expect(kill).not.toHaveBeenCalled();
  });

  it.each(['nowhere:1', 'mid-chunk:0', 'mid-chunk:x', 'mid-chunk:1:explode', 'mid-chunk:1:delay=x'])('refuses the malformed spec %s', (spec) => {
    expect(() => new FaultInjector(spec)).toThrow(/KAFKA_EO_FAULT/);
  });
});
