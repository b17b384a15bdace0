import { once } from 'events';
import { createServer as createHttpServer } from 'http';
import { createServer, type AddressInfo } from 'net';
import { runKafkaEo } from './kafka-eo.command';

/** The command line is refused before anything connects: these run without a database or a broker. */
describe('kafka-eo command line', () => {
  async function run(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; err: string; out: string }> {
    let err = '';
    let out = '';
    const code = await runKafkaEo(argv, { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', ...env }, { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, err, out };
  }

  it('refuses an unknown option, and says how to pass a value that begins with -', async () => {
    const { code, err } = await run(['parked', 'show', 'payments', '-acct']);
    expect(code).toBe(2);
    expect(err).toMatch(/Unknown option '-a'|Unknown option '-acct'/);
    expect(err).toMatch(/after '--'/);
  });

  it('refuses an option without its value, and an option taken for a value', async () => {
    expect(await run(['dlq', 'list', '--limit'])).toMatchObject({ code: 2, err: expect.stringMatching(/--limit <value>' argument missing/) });
    expect(await run(['dlq', 'list', '--reason', '--json'])).toMatchObject({ code: 2, err: expect.stringMatching(/'--reason' argument is ambiguous/) });
  });

  it('takes an option value that begins with - in the --name=value form (then goes on to the database)', async () => {
    const { code, err } = await run(['parked', 'list', '--key=-acct', '--group', 'g']);
    expect(code).toBe(1); // past the parser: the database of this spec does not exist
    expect(err).not.toMatch(/Unknown option|ambiguous|argument missing/);
  });

  it('prints the usage for --help without connecting', async () => {
    const { code, out, err } = await run(['--help']);
    expect(code).toBe(0);
    expect(`${out}${err}`).toMatch(/kafka-eo parked release <topic> <key>/);
  });

  it('asks the overview of an application only with an address, and never takes the token in it', async () => {
    expect(await run(['overview'])).toMatchObject({ code: 2, err: expect.stringMatching(/--url \(or KAFKA_EO_URL\) is required/) });
    expect(await run(['overview', '--url', 'ftp://host'])).toMatchObject({ code: 2, err: expect.stringMatching(/http or https address/) });
    expect(await run(['overview', '--url', 'http://admin:secret@127.0.0.1:1'])).toMatchObject({ code: 2, err: expect.stringMatching(/token comes from ADMIN_TOKEN/) });
    expect(await run(['overview', '--url', 'http://127.0.0.1:1/?token=x'])).toMatchObject({ code: 2, err: expect.stringMatching(/never from the address/) });
  });

  it('says when the application does not answer (exit 1), without a usage dump', async () => {
    // A port nothing listens on: one the system gave and took back.
    const server = createServer().listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const { code, err } = await run(['overview', '--url', `http://127.0.0.1:${port}`]);
    expect(code).toBe(1);
    expect(err).toMatch(new RegExp(`no answer from http://127\\.0\\.0\\.1:${port}: ECONNREFUSED`));
    expect(err).not.toMatch(/Usage:/);
  });

  it("escapes what a request carries in its error messages: a key's or an id's escape sequences never reach the terminal", async () => {
    const hostile = 'acct\u001b]0;owned\u0007\u001b[2J\u009b31m\u202Egnp';
    for (const argv of [['dlq', 'show', hostile, '--group', 'g'], ['dlq', 'show', hostile, '--group', 'g', '--json'], ['parked', 'record', hostile, '--group', 'g'], [`--${hostile}`]]) {
      const { code, err, out } = await run(argv);
      expect(code).toBe(2);
      expect(err).toContain('acct\\u{001B}]0;owned');
      expect(`${err}${out}`).not.toMatch(/[\u001b\u0007\u009b\u202e]/);
    }
  });

  it('asks the overview with the read-only token when both tokens are set, and warns of plain http to another host', async () => {
    const seen: Array<string | undefined> = [];
    const server = createHttpServer((request, response) => {
      seen.push(request.headers.authorization);
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ group: { id: 'g', state: 'Stable', members: [] }, consumer: { state: 'running', lastError: null }, partitions: [], retryTiers: [], totals: { lag: 0, unitsPerSecond: 0, recordsPerSecond: 0, stalled: 0 }, counts: null, publisher: null, outbox: null, health: {}, unreadable: { counts: 'PostgreSQL could not be read: down' } }));
    }).listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const both = await run(['overview', '--url', url], { ADMIN_TOKEN: 'admin-token-0123456789', ADMIN_READ_ONLY_TOKEN: 'read-only-token-0123456789' });
      expect(both).toMatchObject({ code: 0, err: '' });
      expect(both.out).toMatch(/counts +not read: PostgreSQL could not be read: down/);
      expect((await run(['overview', '--url', url], { ADMIN_TOKEN: 'admin-token-0123456789' })).code).toBe(0);
      expect(seen).toEqual(['Bearer read-only-token-0123456789', 'Bearer admin-token-0123456789']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    const remote = await run(['overview', '--url', 'http://nonexistent.invalid:1'], { ADMIN_READ_ONLY_TOKEN: 'read-only-token-0123456789' });
    expect(remote.code).toBe(1);
    expect(remote.err).toMatch(/warning: http:\/\/nonexistent\.invalid:1 is plain http to another host: the admin token crosses the network in clear; use https/);
    for (const local of ['http://localhost.:1', 'http://127.0.0.2:1', 'http://[::1]:1']) expect((await run(['overview', '--url', local])).err).not.toMatch(/warning/);
  });

  it('refuses a transactions command without its address, its reason, a valid producer id or its start offset, before any request', async () => {
    expect(await run(['transactions', 'list'])).toMatchObject({ code: 2, err: expect.stringMatching(/--url \(or KAFKA_EO_URL\) is required/) });
    expect(await run(['transactions', 'abort', 'payments', '0', '4096', '12', '--url', 'http://127.0.0.1:1'])).toMatchObject({ code: 2, err: expect.stringMatching(/--reason is required/) });
    expect(await run(['transactions', 'abort', 'payments', '0', 'x', '12', '--reason', 'r', '--url', 'http://127.0.0.1:1'])).toMatchObject({ code: 2, err: expect.stringMatching(/producerId is required/) });
    expect(await run(['transactions', 'abort', 'payments', '0', '4096', '--reason', 'r', '--url', 'http://127.0.0.1:1'])).toMatchObject({ code: 2, err: expect.stringMatching(/<start-offset>/) });
    expect(await run(['transactions', 'abort', 'payments', '0', '4096', '12', '--reason', 'r', '--url', 'http://127.0.0.1:1'])).toMatchObject({ code: 1, err: expect.stringMatching(/no answer from http:\/\/127.0.0.1:1/) });
  });
});
