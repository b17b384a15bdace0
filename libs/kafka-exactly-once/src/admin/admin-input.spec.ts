import { OperatorRequestError } from '../errors/operator-request.error';
import { auditQuery, bodyOf, listQuery, optionalBoolean, optionalText, pageQuery, storyQuery } from './admin-input';
import { resolveAdminOptions } from './admin.options';

const refused = (work: () => unknown) => {
  try {
    work();
  } catch (err) {
    return { status: (err as OperatorRequestError).status, field: (err as OperatorRequestError).field, message: (err as Error).message };
  }
  throw new Error('not refused');
};

describe('admin input', () => {
  it('takes a JSON object with known fields only, naming an unknown one', () => {
    expect(bodyOf(undefined, ['actor'])).toEqual({});
    expect(bodyOf({ actor: 'x' }, ['actor'])).toEqual({ actor: 'x' });
    expect(refused(() => bodyOf({ force: true }, ['actor']))).toMatchObject({ status: 400, field: 'force' });
    expect(refused(() => bodyOf([1], ['actor']))).toMatchObject({ status: 400, field: 'body' });
    expect(refused(() => bodyOf('text', ['actor']))).toMatchObject({ status: 400, field: 'body' });
  });

  it('checks the types of optional fields', () => {
    expect(optionalText({}, 'actor')).toBeUndefined();
    expect(refused(() => optionalText({ actor: 5 }, 'actor'))).toMatchObject({ status: 400, field: 'actor' });
    expect(refused(() => optionalText({ actor: 'x'.repeat(201) }, 'actor'))).toMatchObject({ field: 'actor' });
    expect(optionalBoolean({ wait: false }, 'wait')).toBe(false);
    expect(refused(() => optionalBoolean({ wait: 'false' }, 'wait'))).toMatchObject({ status: 400, field: 'wait' });
  });

  it('parses list filters, refusing unknown, repeated and malformed ones', () => {
    expect(listQuery({ topic: 't', limit: '20' })).toEqual({ topic: 't', limit: 20, key: undefined, reason: undefined, after: undefined });
    expect(refused(() => listQuery({ limit: '2e1' }))).toMatchObject({ field: 'limit' });
    expect(refused(() => listQuery({ limit: '-1' }))).toMatchObject({ field: 'limit' });
    expect(refused(() => listQuery({ topic: ['a', 'b'] }))).toMatchObject({ field: 'topic' });
    expect(refused(() => listQuery({ colour: 'red' }))).toMatchObject({ field: 'colour' });
  });

  it('refuses to start without a token of at least 16 characters', () => {
    expect(() => resolveAdminOptions(undefined)).toThrow(/refuses to start without a bearer token/);
    expect(() => resolveAdminOptions({ token: '   ' })).toThrow(/refuses to start without a bearer token/);
    expect(() => resolveAdminOptions({ token: 'short' })).toThrow(/at least 16/);
    expect(resolveAdminOptions({ token: 'x'.repeat(16) })).toEqual({ access: { kind: 'token', token: 'x'.repeat(16), tokenName: 'admin' }, waitMs: 30000, actorOf: undefined, console: undefined });
    expect(() => resolveAdminOptions({ token: 'x'.repeat(16), waitMs: -1 })).toThrow(/waitMs/);
  });

  it('takes a read-only token beside the token, or the application\'s guard instead of both', () => {
    const token = 't'.repeat(16);
    const actorOf = (request: { user?: { name: string } }) => request.user?.name;
    expect(resolveAdminOptions({ token, readOnlyToken: 'r'.repeat(16) }).access).toEqual({ kind: 'token', token, tokenName: 'admin', readOnlyToken: 'r'.repeat(16) });
    expect(() => resolveAdminOptions({ token, readOnlyToken: 'short' })).toThrow(/readOnlyToken.*at least 16/);
    expect(() => resolveAdminOptions({ token, readOnlyToken: token })).toThrow(/readOnlyToken.*must differ/);
    class AppGuard {
      canActivate() {
        return true;
      }
    }
    expect(resolveAdminOptions({ guard: AppGuard, actorOf }).access).toEqual({ kind: 'guard', guard: AppGuard });
    const instance = new AppGuard();
    expect(resolveAdminOptions({ guard: instance, actorOf }).access).toEqual({ kind: 'guard', guard: instance });
    expect(() => resolveAdminOptions({ guard: AppGuard, actorOf, token })).toThrow(/either guard or token/);
    expect(() => resolveAdminOptions({ guard: {} as never, actorOf })).toThrow(/must be a Nest guard/);
    expect(() => resolveAdminOptions({ token, actorOf: 'me' as never })).toThrow(/actorOf/);
  });

  it('mounts the console at /kafka-eo by default, at a plain path, refusing any other', () => {
    const token = 't'.repeat(16);
    expect(resolveAdminOptions({ token }).console).toBeUndefined();
    expect(resolveAdminOptions({ token, console: false }).console).toBeUndefined();
    expect(resolveAdminOptions({ token, console: true }).console).toEqual({ path: 'kafka-eo', refreshMs: 5000 });
    expect(resolveAdminOptions({ token, console: '/ops/kafka/' }).console).toEqual({ path: 'ops/kafka', refreshMs: 5000 });
    expect(resolveAdminOptions({ token, console: { path: 'ops', refreshMs: 2000 } }).console).toEqual({ path: 'ops', refreshMs: 2000 });
    for (const path of ['', '/', '/a b', '/a/../b', '/"><script>', 'a//b', '/a?x=1', '/%2e%2e', '/./a']) {
      expect(() => resolveAdminOptions({ token, console: path })).toThrow(/console\.path/);
    }
    expect(() => resolveAdminOptions({ token, console: { refreshMs: 10 } })).toThrow(/console\.refreshMs/);
  });

  it('parses audit and story searches', () => {
    expect(auditQuery({ action: 'release', actor: 'jane', limit: '5' })).toEqual({ action: 'release', actor: 'jane', limit: 5, topic: undefined, key: undefined, after: undefined });
    expect(refused(() => auditQuery({ who: 'x' }))).toMatchObject({ field: 'who' });
    expect(storyQuery({ topic: 't', partition: '3', offset: '9' })).toEqual({ topic: 't', partition: 3, offset: '9', messageId: undefined, key: undefined });
    expect(storyQuery({ partition: 'x' }).partition).toBeNaN();
    expect(refused(() => storyQuery({ id: 'x' }))).toMatchObject({ field: 'id' });
    // The CLI's flags: those not given are undefined, not repeated.
    expect(storyQuery({ messageId: 'm', key: undefined, topic: undefined })).toMatchObject({ messageId: 'm', key: undefined });
    expect(refused(() => storyQuery({ key: ['a', 'b'] }))).toMatchObject({ field: 'key' });
    // A key's story pages: limit and the previous answer's cursor.
    expect(storyQuery({ key: 'k', limit: '20', after: 'c' })).toMatchObject({ key: 'k', limit: 20, after: 'c' });
    expect(refused(() => storyQuery({ key: 'k', limit: 'many' }))).toMatchObject({ field: 'limit' });
    expect(pageQuery({ limit: '10', after: '42' })).toEqual({ limit: 10, after: '42' });
    expect(refused(() => pageQuery({ offset: '3' }))).toMatchObject({ field: 'offset' });
  });
});
