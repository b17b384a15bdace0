import { OperatorRequestError } from '../errors/operator-request.error';
import { bodyOf, listQuery, optionalBoolean, optionalText } from './admin-input';
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
    expect(resolveAdminOptions({ token: 'x'.repeat(16) })).toEqual({ token: 'x'.repeat(16), waitMs: 30000 });
    expect(() => resolveAdminOptions({ token: 'x'.repeat(16), waitMs: -1 })).toThrow(/waitMs/);
  });
});
