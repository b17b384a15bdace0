import type { SpooledRecord } from '../spool/spool-record';
import { trustedRefusal } from './event-publisher';
import type { TopicFacts } from './topic-inspector';

const record: SpooledRecord = { topic: 't', key: null, value: Buffer.from('v').toString('base64'), headers: {}, messageId: 'm-1', spooledAt: 0 };
const facts = (exists: boolean, ageMs: number, now: number): TopicFacts => ({ exists, maxMessageBytes: 1000, limitSource: 'topic max.message.bytes', checkedAt: now - ageMs });

describe('a publish refused from what the cluster said of its topic', () => {
  const now = Date.now();

  it('is refused on facts of the last few seconds: the topic is missing, or the record over its limit', () => {
    expect(trustedRefusal(record, 10, facts(false, 1000, now), now)).toMatchObject({ reason: 'unknown-topic' });
    expect(trustedRefusal(record, 5000, facts(true, 1000, now), now)).toMatchObject({ reason: 'too-large' });
  });

  it('is not refused on older facts (the breaker open, the cluster not asked again): it is spooled, and the drainer decides', () => {
    expect(trustedRefusal(record, 10, facts(false, 60000, now), now)).toBeUndefined();
    expect(trustedRefusal(record, 5000, facts(true, 60000, now), now)).toBeUndefined();
  });

  it('is never refused without facts, nor when they allow it', () => {
    expect(trustedRefusal(record, 10, undefined, now)).toBeUndefined();
    expect(trustedRefusal(record, 10, facts(true, 0, now), now)).toBeUndefined();
  });
});
