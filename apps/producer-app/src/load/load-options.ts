/** Arguments of the load command: `payments --count N --accounts K [--duplicates 0.05] [--rate R]` or `users --count N`. */
export interface LoadOptions {
  kind: 'payments' | 'users';
  count: number;
  accounts: number;
  /** Probability that a publish is followed by a duplicate publish (same message id) of a recent event. */
  duplicates: number;
  /** Publishes per second at most; 0 = as fast as possible. */
  rate: number;
  /** Prefix of account ids (payments) or offset of user ids (users), so runs do not mix. */
  accountPrefix: string;
  userIdStart: number;
  /** Publishes in flight at once (each key stays in order whatever this is). */
  concurrency: number;
  seed: number;
  /** A file that gets one line per acknowledged publish (`<message id> <sent|spooled>`), for verifiers. */
  ackLog?: string;
}

export const USAGE =
  'usage: npm run produce -- payments --count N --accounts K [--duplicates 0.05] [--rate R] [--account-prefix acc-] [--seed S] [--ack-log FILE]\n' +
  '       npm run produce -- users --count N [--user-id-start 1] [--duplicates 0.05] [--rate R]';

export function parseLoadOptions(argv: string[]): LoadOptions {
  const [kind, ...rest] = argv;
  if (kind !== 'payments' && kind !== 'users') throw new Error(`first argument must be "payments" or "users"\n${USAGE}`);
  const flags = new Map<string, string>();
  for (let i = 0; i < rest.length; i++) {
    const name = rest[i];
    if (!name.startsWith('--') || rest[i + 1] === undefined) throw new Error(`unexpected "${name}"\n${USAGE}`);
    flags.set(name.slice(2), rest[++i]);
  }
  const known = ['count', 'accounts', 'duplicates', 'rate', 'account-prefix', 'user-id-start', 'concurrency', 'seed', 'ack-log'];
  for (const name of flags.keys()) if (!known.includes(name)) throw new Error(`unknown option --${name}\n${USAGE}`);
  const number = (name: string, fallback: number, check: (n: number) => boolean, what: string) => {
    const raw = flags.get(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isFinite(n) || !check(n)) throw new Error(`--${name} must be ${what}, got "${raw}"`);
    return n;
  };
  const count = number('count', NaN, (n) => Number.isInteger(n) && n > 0, 'a positive integer');
  if (Number.isNaN(count)) throw new Error(`--count is required\n${USAGE}`);
  return {
    kind,
    count,
    accounts: number('accounts', 100, (n) => Number.isInteger(n) && n > 0, 'a positive integer'),
    duplicates: number('duplicates', 0, (n) => n >= 0 && n < 1, 'a probability from 0 to below 1'),
    rate: number('rate', 0, (n) => n >= 0, 'a number of publishes per second (0 = unlimited)'),
    accountPrefix: flags.get('account-prefix') ?? 'acc-',
    userIdStart: number('user-id-start', 1, (n) => Number.isInteger(n) && n >= 0, 'a non-negative integer'),
    concurrency: number('concurrency', 64, (n) => Number.isInteger(n) && n > 0, 'a positive integer'),
    seed: number('seed', Date.now() % 2147483647, (n) => Number.isInteger(n), 'an integer'),
    ackLog: flags.get('ack-log'),
  };
}
