import fc from 'fast-check';
import { displayAnsiLogText, displayLogText } from './run-logs';

// What a terminal or a browser interprets (assigned characters only; U+2065 and U+E0002–U+E001F are
// not): none of these may survive displayLogText (tab and LF may).
const INTERPRETING =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]|[\u{e0001}\u{e0020}-\u{e007f}]|\p{Cs}/u;

/** Any text: every code point (lone surrogates too), with the characters that matter here made frequent. */
const anyText = fc.string({
  unit: fc.oneof(
    fc.constantFrom(
      '\u001b',
      '[31m',
      '\r',
      '\t',
      '\n',
      '\u202e',
      '\u200b',
      '\ud83d',
      '\ude00',
      '\u{e0041}',
      'a',
    ),
    fc.integer({ min: 0, max: 0x10ffff }).map((code) => String.fromCodePoint(code)),
  ),
});

describe('displayLogText: what the admin views show (ADR 0032)', () => {
  it.each([
    ['CR', 'progress 10%\rprogress 20%\r\n', 'progress 10%\\u000dprogress 20%\\u000d\n'],
    ['an ANSI colour', '\u001b[31mred\u001b[0m', '\\u001b[31mred\\u001b[0m'],
    ['the 8-bit CSI and NEL', '\u009b2J\u0085', '\\u009b2J\\u0085'],
    [
      'an OSC hyperlink',
      '\u001b]8;;https://x.test\u0007link\u001b]8;;\u0007',
      '\\u001b]8;;https://x.test\\u0007link\\u001b]8;;\\u0007',
    ],
    ['U+202E (right-to-left override)', 'invoice\u202efdp.exe', 'invoice\\u202efdp.exe'],
    [
      'bidi isolates and embeddings',
      '\u2066a\u2069\u202ab\u202c\u061c',
      '\\u2066a\\u2069\\u202ab\\u202c\\u061c',
    ],
    ['zero-width characters and the BOM', 'a\u200bb\u200dc\u2060d\ufeff', 'a\\u200bb\\u200dc\\u2060d\\ufeff'],
    ['line and paragraph separators', 'a\u2028b\u2029c', 'a\\u2028b\\u2029c'],
    ['tag characters (above the BMP)', 'hi\u{e0041}\u{e007f}', 'hi\\u{e0041}\\u{e007f}'],
    ['a lone surrogate', 'x\ud800y', 'x\\ud800y'],
    ['DEL and BEL', 'a\u007fb\u0007', 'a\\u007fb\\u0007'],
  ])('shows %s as visible escapes', (_what, raw, shown) => {
    expect(displayLogText(raw)).toBe(shown);
  });

  it('keeps tab, LF and every other character as written (RTL letters, emoji, accents)', () => {
    const plain = 'col1\tcol2\nשלום مرحبا 😀 é ü 中文 \\u202e typed literally\n';
    expect(displayLogText(plain)).toBe(plain);
  });

  it('leaves nothing a terminal or a browser interprets, for any text', () => {
    fc.assert(
      fc.property(anyText, (raw) => {
        expect(INTERPRETING.test(displayLogText(raw))).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('works character by character: a chunk boundary (inside an escape sequence too) changes nothing; stable', () => {
    fc.assert(
      fc.property(anyText, anyText, (a, b) => {
        // Both halves of a pair cut apart are lone surrogates: the pair is no longer one character.
        fc.pre(!/[\ud800-\udbff]$/.test(a) && !/^[\udc00-\udfff]/.test(b));
        expect(displayLogText(a) + displayLogText(b)).toBe(displayLogText(a + b));
        expect(displayLogText(displayLogText(a))).toBe(displayLogText(a));
      }),
      { numRuns: 500 },
    );
    expect(displayLogText('\u001b') + displayLogText('[31mred')).toBe(displayLogText('\u001b[31mred'));
  });
});

describe('displayAnsiLogText: the web console view keeps colour sequences only (ADR 0052)', () => {
  it('keeps whole SGR sequences and neutralizes every other escape', () => {
    expect(displayAnsiLogText('\u001b[1;31mred\u001b[0m plain')).toBe('\u001b[1;31mred\u001b[0m plain');
    // Cursor moves, screen clears, titles (OSC) and a lone ESC are shown, not kept.
    expect(displayAnsiLogText('a\u001b[2Jb\u001b]0;title\u0007c\u001bd')).toBe(
      'a\\u001b[2Jb\\u001b]0;title\\u0007c\\u001bd',
    );
    // A sequence cut between two chunks is neutralized in each.
    expect(displayAnsiLogText('x\u001b[3') + displayAnsiLogText('1my')).toBe('x\\u001b[31my');
    // Format characters as in the text view; an overlong parameter list is not SGR.
    expect(displayAnsiLogText('\u202eexe\u001b[' + '1;'.repeat(20) + 'm')).toBe(
      displayLogText('\u202eexe\u001b[' + '1;'.repeat(20) + 'm'),
    );
  });
});
