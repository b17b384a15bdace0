import { runInCall } from '../database/handler-calls';
import { UnitConnectionError } from '../database/unit-connection';
import { UnitNotCommittedError } from '../errors/unit-not-committed.error';
import { commitChecked, refuseLateStatements } from './clean-release';

/** A node-postgres client as the session holds it: its transaction status, and the tag it answers COMMIT with. */
function fakeSession(status: string, commitTag = 'COMMIT', afterCommit?: () => void) {
  const sent: string[] = [];
  class Client {
    status = status;
    query(text: string) {
      sent.push(text);
      if (text === 'COMMIT') this.status = 'I';
      return Promise.resolve({ command: text === 'COMMIT' ? commitTag : text.split(' ')[0], rows: [] });
    }
    getTransactionStatus() {
      return this.status;
    }
  }
  const client = new Client();
  const session = {
    pgClient: client,
    async commitTransaction() {
      await client.query('COMMIT');
      afterCommit?.();
    },
  };
  return { session: session as never, client, sent };
}

describe('commitChecked', () => {
  it('commits a sound transaction whose COMMIT PostgreSQL answered with COMMIT, and leaves the client as it found it', async () => {
    const { session, client, sent } = fakeSession('T');
    await commitChecked(session);
    expect(sent).toEqual(['COMMIT']);
    expect(Object.prototype.hasOwnProperty.call(client, 'query')).toBe(false);
  });

  it('refuses a COMMIT PostgreSQL answered with ROLLBACK (a transaction that failed after the last statement)', async () => {
    const { session } = fakeSession('T', 'ROLLBACK');
    await expect(commitChecked(session)).rejects.toThrow(new UnitNotCommittedError('PostgreSQL answered the COMMIT with ROLLBACK'));
  });

  it('does not send the COMMIT of a transaction that failed, or that had ended, before it', async () => {
    for (const [status, why] of [
      ['E', /had failed before the COMMIT/],
      ['I', /had ended before the COMMIT/],
    ] as const) {
      const { session, sent } = fakeSession(status);
      await expect(commitChecked(session)).rejects.toThrow(why);
      expect(sent).toEqual([]);
    }
  });

  it('takes a commit PostgreSQL made for one even when the data layer fails after it (a subscriber of afterTransactionCommit)', async () => {
    const warnings: string[] = [];
    const { session } = fakeSession('T', 'COMMIT', () => {
      throw new Error('a subscriber failed');
    });
    await commitChecked(session, { warn: (m) => warnings.push(m) });
    expect(warnings).toEqual([expect.stringMatching(/PostgreSQL committed the unit of work, and the data layer's commit then failed \(a subscriber failed\)/)]);
  });
});

describe('refuseLateStatements', () => {
  it("refuses on the connection itself what comes from a handler call that is over, and nothing else; taken off, the client's own query is back", async () => {
    const { session, client, sent } = fakeSession('T');
    const unguard = refuseLateStatements(session)!;
    const call = { live: true };
    let late: Promise<unknown> | undefined;
    await runInCall(call, async () => {
      await client.query('SELECT 1');
      late = new Promise((resolve) => setTimeout(() => resolve(client.query('INSERT late').catch((e: unknown) => e)), 5));
    });
    call.live = false;
    expect(await late).toBeInstanceOf(UnitConnectionError);
    await client.query('SELECT 2'); // the library's own, from outside any call
    unguard();
    expect(sent).toEqual(['SELECT 1', 'SELECT 2']);
    expect(Object.prototype.hasOwnProperty.call(client, 'query')).toBe(false);
  });
});
