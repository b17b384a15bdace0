import { KeyLanes } from './key-lanes';

/** A task that can be finished from outside, noting when it started. */
function gate(log: string[], name: string) {
  let finish!: (fail?: boolean) => void;
  const task = () =>
    new Promise<string>((resolve, reject) => {
      log.push(`start ${name}`);
      finish = (fail = false) => {
        log.push(`end ${name}`);
        if (fail) reject(new Error(name));
        else resolve(name);
      };
    });
  return { task, finish: (fail?: boolean) => finish(fail) };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('KeyLanes', () => {
  it('runs the tasks of one lane one after the other, in the order they were added', async () => {
    const log: string[] = [];
    const lanes = new KeyLanes(8);
    const a1 = gate(log, 'a1');
    const a2 = gate(log, 'a2');
    const a3 = gate(log, 'a3');
    const results = [lanes.run('a', a1.task), lanes.run('a', a2.task), lanes.run('a', a3.task)];
    await settle();
    expect(log).toEqual(['start a1']);
    a1.finish();
    await settle();
    expect(log).toEqual(['start a1', 'end a1', 'start a2']);
    a2.finish();
    await settle();
    a3.finish();
    await expect(Promise.all(results)).resolves.toEqual(['a1', 'a2', 'a3']);
    expect(log).toEqual(['start a1', 'end a1', 'start a2', 'end a2', 'start a3', 'end a3']);
  });

  it('runs other lanes meanwhile: a slow lane holds back only its own later tasks', async () => {
    const log: string[] = [];
    const lanes = new KeyLanes(8);
    const a1 = gate(log, 'a1');
    const a2 = gate(log, 'a2');
    const b1 = gate(log, 'b1');
    const c1 = gate(log, 'c1');
    const results = [lanes.run('a', a1.task), lanes.run('a', a2.task), lanes.run('b', b1.task), lanes.run('c', c1.task)];
    await settle();
    expect(log).toEqual(['start a1', 'start b1', 'start c1']);
    b1.finish();
    c1.finish();
    await settle();
    expect(log).not.toContain('start a2');
    a1.finish();
    await settle();
    a2.finish();
    await expect(Promise.all(results)).resolves.toEqual(['a1', 'a2', 'b1', 'c1']);
  });

  it('never runs more than its limit at once, and hands a freed slot to the task added first', async () => {
    const log: string[] = [];
    const lanes = new KeyLanes(2);
    const tasks = ['a', 'b', 'c', 'd'].map((k) => gate(log, k));
    const results = tasks.map((t, i) => lanes.run(['a', 'b', 'c', 'd'][i], t.task));
    await settle();
    expect(log).toEqual(['start a', 'start b']);
    tasks[1].finish();
    await settle();
    expect(log).toEqual(['start a', 'start b', 'end b', 'start c']);
    tasks[0].finish();
    await settle();
    expect(log.at(-1)).toBe('start d');
    tasks[2].finish();
    tasks[3].finish();
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd']);
  });

  it('reports a failed task to its caller and still runs the lane\'s next task after it', async () => {
    const log: string[] = [];
    const lanes = new KeyLanes(1);
    const a1 = gate(log, 'a1');
    const a2 = gate(log, 'a2');
    const first = lanes.run('a', a1.task);
    const second = lanes.run('a', a2.task);
    await settle();
    a1.finish(true);
    await expect(first).rejects.toThrow('a1');
    await settle();
    expect(log).toEqual(['start a1', 'end a1', 'start a2']);
    a2.finish();
    await expect(second).resolves.toBe('a2');
  });

  it('gives the slot back when a task throws before returning a promise', async () => {
    const lanes = new KeyLanes(1);
    await expect(lanes.run('a', () => { throw new Error('sync'); })).rejects.toThrow('sync');
    await expect(lanes.run('b', async () => 'next')).resolves.toBe('next');
  });

  it('refuses a limit below 1', () => {
    expect(() => new KeyLanes(0)).toThrow(RangeError);
    expect(() => new KeyLanes(1.5)).toThrow(RangeError);
  });
});
