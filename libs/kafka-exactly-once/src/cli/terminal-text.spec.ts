import { jsonForTerminal, printable } from './terminal-text';

describe('printable', () => {
  it('writes out what would act on a terminal or hide from the reader', () => {
    expect(printable('acct-1\u001b]0;owned\u0007\u001b[2J')).toBe('acct-1\\u{001B}]0;owned\\u{0007}\\u{001B}[2J');
    expect(printable('\u009b31m')).toBe('\\u{009B}31m');
    expect(printable('pay\u202Egnp.exe')).toBe('pay\\u{202E}gnp.exe');
    expect(printable('a\u200Bb\uFEFF')).toBe('a\\u{200B}b\\u{FEFF}');
    expect(printable('lone \uD800 surrogate')).toBe('lone \\u{D800} surrogate');
    expect(printable('two\nlines\tand tab')).toBe('two\\nlines\\tand tab');
  });

  it('keeps readable text as it is, other scripts and emoji included', () => {
    expect(printable('Zürich → 東京 💳 acct-42')).toBe('Zürich → 東京 💳 acct-42');
  });
});

describe('jsonForTerminal', () => {
  it('is the same JSON value with C1 controls and bidirectional characters escaped', () => {
    const value = { key: 'a\u009b2J\u202Eb\u001b', n: 1, nested: ['\u2066x\u2069'] };
    const text = jsonForTerminal(value);
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e\u2066\u2069]/);
    expect(JSON.parse(text)).toEqual(value);
  });
});
