/**
 * ANSI colour codes in log text become spans with classes; everything else is text. Only SGR
 * sequences (`ESC [ … m`) change the look; any other escape sequence is dropped, never shown or run.
 */
export interface Styled {
  text: string;
  classes: string;
}

// eslint-disable-next-line no-control-regex -- matching escape sequences is the point
const ESCAPE = /\x1b\[([0-9;]*)([A-Za-z])|\x1b[^[]?/g;

export function parseAnsi(input: string): Styled[] {
  const out: Styled[] = [];
  let fg = '';
  let bg = '';
  let bold = false;
  let last = 0;
  const classes = () => [fg, bg, bold ? 'ansi-bold' : ''].filter(Boolean).join(' ');
  const push = (text: string) => {
    // Other control characters (not tab or newline) are shown as nothing.
    // eslint-disable-next-line no-control-regex -- as above
    const clean = text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '');
    if (clean) out.push({ text: clean, classes: classes() });
  };
  for (const match of input.matchAll(ESCAPE)) {
    push(input.slice(last, match.index));
    last = match.index! + match[0].length;
    if (match[2] !== 'm') continue;
    const codes = (match[1] || '0').split(';').map(Number);
    for (const code of codes) {
      if (code === 0) [fg, bg, bold] = ['', '', false];
      else if (code === 1) bold = true;
      else if (code === 22) bold = false;
      else if (code >= 30 && code <= 37) fg = `ansi-fg-${code - 30}`;
      else if (code >= 90 && code <= 97) fg = `ansi-fg-${code - 90 + 8}`;
      else if (code === 39) fg = '';
      else if (code >= 40 && code <= 47) bg = `ansi-bg-${code - 40}`;
      else if (code === 49) bg = '';
    }
  }
  push(input.slice(last));
  return out;
}

export function AnsiText({ text }: { text: string }) {
  return (
    <>
      {parseAnsi(text).map((part, n) =>
        part.classes ? (
          <span key={n} class={part.classes}>
            {part.text}
          </span>
        ) : (
          part.text
        ),
      )}
    </>
  );
}
