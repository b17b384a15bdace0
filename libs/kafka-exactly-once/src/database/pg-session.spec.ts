import { EventEmitter } from 'events';
import { PgSession } from './pg-session';

/** A node-postgres client as the pool lends it: an EventEmitter with query and release. */
class FakeClient extends EventEmitter {
  released: Array<Error | boolean | undefined> = [];
  async query() {
    return { rows: [], rowCount: 0, command: 'SELECT' };
  }
  release(err?: Error | boolean) {
    this.released.push(err);
  }
}

describe('PgSession', () => {
  it('keeps a checked-out connection\'s failure between statements (no unhandled error event), and destroys it at release', async () => {
    const client = new FakeClient();
    const session = new PgSession({ connect: async () => client } as never);
    await session.query('SELECT 1');
    const ended = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    // Without a listener, EventEmitter throws an 'error' event: in a process, that ends it.
    expect(() => client.emit('error', ended)).not.toThrow();
    await session.release();
    expect(client.released).toEqual([ended]);
    expect(client.listenerCount('error')).toBe(0);
  });

  it('gives a healthy connection back to the pool, its listener removed', async () => {
    const client = new FakeClient();
    const session = new PgSession({ connect: async () => client } as never);
    await session.query('SELECT 1');
    expect(client.listenerCount('error')).toBe(1);
    await session.release();
    expect(client.released).toEqual([false]);
    expect(client.listenerCount('error')).toBe(0);
  });
});
