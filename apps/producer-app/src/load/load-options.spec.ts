import { parseLoadOptions } from './load-options';

describe('load command options', () => {
  it('parses a payments run', () => {
    expect(parseLoadOptions(['payments', '--count', '20000', '--accounts', '200', '--duplicates', '0.05', '--rate', '500', '--seed', '7'])).toMatchObject({
      kind: 'payments',
      count: 20000,
      accounts: 200,
      duplicates: 0.05,
      rate: 500,
      seed: 7,
      accountPrefix: 'acc-',
    });
  });

  it.each([
    [['refunds', '--count', '1'], /payments" or "users/],
    [['payments'], /--count is required/],
    [['payments', '--count', '-3'], /--count must be a positive integer/],
    [['payments', '--count', '3', '--duplicates', '1.5'], /--duplicates must be a probability/],
    [['payments', '--count', '3', '--colour', 'red'], /unknown option --colour/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseLoadOptions(argv as string[])).toThrow(message);
  });
});
