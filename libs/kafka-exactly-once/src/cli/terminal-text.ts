/**
 * Whether a character could act on a terminal or hide from the reader: C0 and C1 control characters (ESC, CSI:
 * a record's key could otherwise move the cursor, retitle the window or rewrite the lines above it),
 * bidirectional marks, overrides and isolates, zero-width and other invisible characters, lone surrogates. The
 * console page escapes the same set (console/page/console.js, `hidden`).
 */
function hidden(c: number): boolean {
  return (
    c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0xad || c === 0x34f || c === 0x61c || c === 0x115f || c === 0x1160 || c === 0x17b4 || c === 0x17b5 ||
    (c >= 0x180b && c <= 0x180f) || (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f) || c === 0x3164 ||
    (c >= 0xfe00 && c <= 0xfe0f) || c === 0xfeff || c === 0xffa0 || (c >= 0xfff0 && c <= 0xfffb) || (c >= 0xd800 && c <= 0xdfff) || (c >= 0xe0000 && c <= 0xe0fff)
  );
}

/** Text for a terminal: each such character written out as \u{XXXX} (a newline as \n, a tab as \t). */
export function printable(text: string): string {
  let out = '';
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    if (c === 10) out += '\\n';
    else if (c === 9) out += '\\t';
    else if (hidden(c)) out += `\\u{${c.toString(16).toUpperCase().padStart(4, '0')}}`;
    else out += ch;
  }
  return out;
}

/**
 * JSON for a terminal: the same JSON value, with every character `printable` writes out escaped as \uXXXX
 * (JSON.stringify escapes C0 controls and lone surrogates only; C1 controls, 0x9B is CSI on some terminals,
 * bidirectional and invisible characters it leaves as they are). Outside strings JSON has only newlines and
 * printable characters, so each one escaped is inside a string.
 */
export function jsonForTerminal(document: unknown): string {
  let out = '';
  for (const ch of JSON.stringify(document, null, 2)) {
    const c = ch.codePointAt(0)!;
    if (c === 10 || !hidden(c)) out += ch;
    else for (let i = 0; i < ch.length; i++) out += `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`;
  }
  return out;
}
