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

  it('makes UUIDv7 ids that sort by creation time', () => {
    const early = uuidv7(1_700_000_000_000);
    const late = uuidv7(1_700_000_000_001);
    expect(early).toMatch(UUID);
    expect(early.charAt(14)).toBe('7');
    expect(early < late).toBe(true);
    expect(early.slice(0, 13)).toBe('018bcfe5-6800');
  });
});
