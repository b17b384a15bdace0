import { InvalidOptionsError } from '../errors/invalid-options.error';
import { resolveAdminOptions } from './admin.options';
import { KafkaExactlyOnceAdminModule } from './kafka-exactly-once-admin.module';

describe('admin module options', () => {
  const guard = { canActivate: () => true };

  it('refuses a guard without actorOf at boot: the audit must name who acted, and only the application knows', () => {
    expect(() => KafkaExactlyOnceAdminModule.forRoot({ guard })).toThrow(InvalidOptionsError);
    expect(() => resolveAdminOptions({ guard })).toThrow(/option "actorOf" is required with guard: the audit records who acted.*actorOf: \(request\) => request\.user\?\.email/);
    expect(resolveAdminOptions({ guard, actorOf: (r) => r.user?.email }).access).toEqual({ kind: 'guard', guard });
  });

  it('names the token that acts in the audit: token:admin, or token:<tokenName>', () => {
    expect(resolveAdminOptions({ token: 't'.repeat(16) }).access).toMatchObject({ kind: 'token', tokenName: 'admin' });
    expect(resolveAdminOptions({ token: 't'.repeat(16), tokenName: 'payments-oncall' }).access).toMatchObject({ tokenName: 'payments-oncall' });
    expect(() => resolveAdminOptions({ token: 't'.repeat(16), tokenName: 'a b' })).toThrow(/option "tokenName" must be 1 to 64 letters/);
    expect(() => resolveAdminOptions({ guard, actorOf: () => 'x', tokenName: 'x' })).toThrow(/option "guard" replaces the tokens/);
  });
});
