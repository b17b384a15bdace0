import { once } from 'events';
import { createServer, type AddressInfo } from 'net';
import { runKafkaEo } from './kafka-eo.command';

/** The command line is refused before anything connects: these run without a database or a broker. */
describe('kafka-eo command line', () => {
  async function run(argv: string[]): Promise<{ code: number; err: string; out: string }> {
    let err = '';
    let out = '';
    const code = await runKafkaEo(argv, { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }, { out: (t) => (out += t), err: (t) => (err += t) });
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
});
