import { REDACTED, StreamRedactor, redactText } from './redaction';

/** Every way to cut `text` in two pieces, through one redactor: what comes out. */
function throughCuts(values: string[], text: string): string[] {
  const outs: string[] = [];
  for (let cut = 0; cut <= text.length; cut++) {
    const r = new StreamRedactor(values);
    outs.push(r.write(text.slice(0, cut)) + r.write(text.slice(cut)) + r.end());
  }
  return outs;
}

describe('redaction of secret values (ADR 0050)', () => {
  it('replaces every occurrence, the longest value first where they overlap', () => {
    expect(redactText('a=s3cret b=s3cret&t0ken c', ['s3cret', 's3cret&t0ken'])).toBe(
      `a=${REDACTED} b=${REDACTED} c`,
    );
    expect(redactText('nothing here', ['s3cret'])).toBe('nothing here');
    expect(redactText('s3cret', [])).toBe('s3cret');
  });

  it('finds a value split across pieces wherever the cut falls, and loses no other character', () => {
    const text = 'head s3cret-value mid s3cret-value tail';
    for (const out of throughCuts(['s3cret-value'], text)) expect(out).toBe('head *** mid *** tail');
  });

  it('holds back at most the longest value less one character, and emits the rest at once', () => {
    const r = new StreamRedactor(['abcdef']);
    expect(r.write('0123456789')).toBe('01234');
    expect(r.write('abc')).toBe('567');
    expect(r.write('def!')).toBe('89***');
    expect(r.end()).toBe('!');
  });

  it('never keeps half a surrogate pair back (no lone surrogate goes out)', () => {
    const r = new StreamRedactor(['xy']);
    const out = r.write('a\u{1F600}');
    expect(out).toBe('a');
    expect(out + r.end()).toBe('a\u{1F600}');
  });

  it('a value that looks like the mask is not matched again in the held tail', () => {
    for (const out of throughCuts(['**'], 'x**y')) expect(out).toBe('x***y');
  });
});
