import { outputMessageId, uuidv7 } from './message-ids';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-([0-9a-f])[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('message ids', () => {
  it('derives the same output id on every replay, a different one per group, input and index', () => {
    const id = outputMessageId('g', 'input-1', 0);
    expect(id).toMatch(UUID);
    expect(id.charAt(14)).toBe('5');
    expect(outputMessageId('g', 'input-1', 0)).toBe(id);
    expect(new Set([id, outputMessageId('g', 'input-1', 1), outputMessageId('g', 'input-2', 0), outputMessageId('h', 'input-1', 0)]).size).toBe(4);
  });

  it('derives the ids earlier versions derived (a replay after an upgrade carries the same ids)', () => {
    expect(outputMessageId('payments', 'm-1', 0)).toBe('e3eeb68e-403a-5ce1-bf7d-fdab804a1fe7');
    expect(outputMessageId('grüppe', 'ünï\u0000code', 3)).toBe('0f7311e3-6406-5879-985e-f1c34352b69e');
  });

  it('makes UUIDv7 ids that sort by creation time', () => {
    const early = uuidv7(1_700_000_000_000);
    const late = uuidv7(1_700_000_000_001);
    expect(early).toMatch(UUID);
    expect(early.charAt(14)).toBe('7');
    expect(early < late).toBe(true);
    expect(early.slice(0, 13)).toBe('018bcfe5-6800');
  });
});
