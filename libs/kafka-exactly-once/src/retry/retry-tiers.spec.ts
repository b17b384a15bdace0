import { NonRetriableHandlerError } from '../errors/non-retriable-handler.error';
import { RETRY_HEADERS } from '../kafka-exactly-once.constants';
import { toKafkaHeaders } from '../engine/record-headers';
import { identify } from '../engine/record-identity';
import { dueAt, mayRetryLater, parseDelay, resolveRetryTiers, retryOrigin, routesOf, tierHeaders } from './retry-tiers';
import type { HandlerDefinition } from '../engine/handler-definition';

const failure = { name: 'GatewayDown', message: 'gateway answered 503', stack: 'at x', reason: 'handler-failed' };
const headersOf = (pairs: Array<[string, string | null]>) => toKafkaHeaders({ topic: 't', key: null, value: null, h: pairs });
const text = (headers: ReturnType<typeof headersOf>, name: string) => {
  const value = headers[name];
  return (Array.isArray(value) ? value : [value]).map((v) => (v === undefined || v === null ? v : v.toString()));
};

describe('retry tiers', () => {
  it('reads delays as ms or as text with a unit', () => {
    expect(['500ms', '10s', '1.5m', '2h', '1d', 250].map((d) => parseDelay(d, 'f'))).toEqual([500, 10000, 90000, 7200000, 86400000, 250]);
  });

  it('refuses delays it cannot read, too short or too long, naming the option', () => {
    expect(() => parseDelay('10 minutes', 'retryTopics.delays[0]')).toThrow(/retryTopics\.delays\[0\].*'10s'/);
    expect(() => parseDelay(50, 'f')).toThrow(/from 100 to 604800000/);
    expect(() => parseDelay('8d', 'f')).toThrow(/7 days/);
    expect(() => parseDelay(1.5, 'f')).toThrow(/whole number/);
    expect(() => parseDelay(null, 'f')).toThrow(/number of ms/);
  });

  it('names a topic per tier and checks the option', () => {
    const tiers = resolveRetryTiers('p.payments', { delays: ['10s', '1m'] });
    expect(tiers.topics).toEqual(['p.payments.retry.1', 'p.payments.retry.2']);
    expect(tiers.delaysMs).toEqual([10000, 60000]);
    expect(() => resolveRetryTiers('t', { delays: [] })).toThrow(/retryTopics\.delays.*1 to 10/);
    expect(() => resolveRetryTiers('t', { delays: new Array(11).fill('1s') })).toThrow(/1 to 10/);
    expect(() => resolveRetryTiers('t', { delays: ['1s'], deadLetterOn: ['Error' as never] })).toThrow(/deadLetterOn.*error classes/);
  });

  it('moves on only failures of the handler that may pass', () => {
    class InvalidCard extends Error {}
    const tiers = resolveRetryTiers('t', { delays: ['1s'], deadLetterOn: [InvalidCard] });
    expect(mayRetryLater(tiers, failure, new Error('503'))).toBe(true);
    expect(mayRetryLater(tiers, failure)).toBe(true);
    expect(mayRetryLater(tiers, failure, new NonRetriableHandlerError('no such account'))).toBe(false);
    expect(mayRetryLater(tiers, failure, Object.assign(new Error('x'), { retriable: false }))).toBe(false);
    expect(mayRetryLater(tiers, failure, new InvalidCard('expired'))).toBe(false);
    expect(mayRetryLater(tiers, failure, new Error('wrapped', { cause: new InvalidCard('expired') }))).toBe(false);
    expect(mayRetryLater(tiers, { ...failure, reason: 'decode-failed' }, new Error('bad bytes'))).toBe(false);
  });

  it('builds the headers of a record moved on: its own byte for byte, forged retry headers dropped, origin, tier, due time, error, history', () => {
    const own: Array<[string, string | null]> = [
      [Buffer.from('message-id').toString('base64'), Buffer.from([0xff, 0x00, 0x01]).toString('base64')],
      [Buffer.from('trace').toString('base64'), null],
      [Buffer.from(RETRY_HEADERS.originalTopic).toString('base64'), Buffer.from('someone-else').toString('base64')],
      [Buffer.from(RETRY_HEADERS.history).toString('base64'), Buffer.from('{"forged":true}').toString('base64')],
    ];
    const where = { topic: 'payments', partition: 2, offset: '41' };
    const first = headersOf(tierHeaders(headersOf(own), 0, where, where, 3, failure, 5000, 1000));
    expect(Buffer.from(first['message-id'] as Buffer)).toEqual(Buffer.from([0xff, 0x00, 0x01]));
    expect(first.trace).toBeNull();
    expect(text(first, RETRY_HEADERS.originalTopic)).toEqual(['payments']);
    expect(text(first, RETRY_HEADERS.attempt)).toEqual(['1']);
    expect(text(first, RETRY_HEADERS.dueAt)).toEqual(['5000']);
    expect(text(first, RETRY_HEADERS.errorMessage)).toEqual(['gateway answered 503']);
    const history = text(first, RETRY_HEADERS.history).map((h) => JSON.parse(h!));
    expect(history).toEqual([{ stage: 0, topic: 'payments', partition: 2, offset: '41', attempts: 3, error: 'GatewayDown', message: 'gateway answered 503', at: new Date(1000).toISOString() }]);

    // From tier 1 to tier 2: the history grows, the origin stays.
    const onTier = { topic: 'payments.retry.1', partition: 0, offset: '7' };
    const second = headersOf(tierHeaders(first, 1, onTier, retryOrigin(first, 'payments')!, 1, { ...failure, message: 'timeout' }, 9000, 6000));
    expect(text(second, RETRY_HEADERS.originalTopic)).toEqual(['payments']);
    expect(text(second, RETRY_HEADERS.originalOffset)).toEqual(['41']);
    expect(text(second, RETRY_HEADERS.attempt)).toEqual(['2']);
    expect(text(second, RETRY_HEADERS.history).map((h) => JSON.parse(h!).stage)).toEqual([0, 1]);
    expect(text(second, RETRY_HEADERS.errorMessage)).toEqual(['timeout']);
  });

  it('reads the origin only when it names the topic or one of its tiers, with whole numbers', () => {
    const h = (topic: string, partition: string, offset: string) =>
      headersOf([
        [Buffer.from(RETRY_HEADERS.originalTopic).toString('base64'), Buffer.from(topic).toString('base64')],
        [Buffer.from(RETRY_HEADERS.originalPartition).toString('base64'), Buffer.from(partition).toString('base64')],
        [Buffer.from(RETRY_HEADERS.originalOffset).toString('base64'), Buffer.from(offset).toString('base64')],
      ]);
    expect(retryOrigin(h('payments', '3', '0099'), 'payments')).toEqual({ topic: 'payments', partition: 3, offset: '99' });
    expect(retryOrigin(h('other', '3', '9'), 'payments')).toBeUndefined();
    expect(retryOrigin(h('payments', '-1', '9'), 'payments')).toBeUndefined();
    expect(retryOrigin(h('payments', '1', '9'.repeat(30)), 'payments')).toBeUndefined();
    expect(retryOrigin(headersOf([]), 'payments')).toBeUndefined();
  });

  it('keeps a record known by its first identity on every tier', () => {
    const origin = { topic: 'payments', partition: 3, offset: '99' };
    const onTopic = identify('payments', 3, { headers: {}, offset: '99' }, 'topic');
    const onTier = identify('payments.retry.2', 0, { headers: {}, offset: '5' }, 'topic', { base: 'payments', origin });
    expect(onTier).toEqual(onTopic);
    const withId = identify('payments.retry.1', 0, { headers: { 'message-id': Buffer.from('m-1') }, offset: '5' }, 'topic', { base: 'payments' });
    expect(withId.scope).toBe('payments');
    expect(withId.displayId).toBe('m-1');
  });

  it('is due at its due time, never later than its timestamp plus the delay, and now when neither can be read', () => {
    const due = (value: string | undefined, timestamp: string) =>
      dueAt({ headers: value === undefined ? {} : { [RETRY_HEADERS.dueAt]: Buffer.from(value) }, timestamp }, 10000, 50000);
    expect(due('15000', '5000')).toBe(15000);
    expect(due(String(Number.MAX_SAFE_INTEGER), '5000')).toBe(15000);
    expect(due('garbage', '5000')).toBe(15000);
    expect(due(undefined, '5000')).toBe(15000);
    expect(due(undefined, 'x')).toBe(50000);
    expect(due('-5', '-1')).toBe(50000);
  });

  it('routes each topic and tier to its handler', () => {
    const handler = { topic: 'a', retryTopics: resolveRetryTiers('a', { delays: ['1s', '2s'] }) } as HandlerDefinition;
    const plain = { topic: 'b' } as HandlerDefinition;
    const routes = routesOf([handler, plain]);
    expect([...routes].map(([topic, r]) => [topic, r.handler.topic, r.stage])).toEqual([
      ['a', 'a', 0],
      ['a.retry.1', 'a', 1],
      ['a.retry.2', 'a', 2],
      ['b', 'b', 0],
    ]);
  });
});
