import { ValidationError } from '@ql/domain';

/** Deepest nesting a request body may have: real bodies nest ≤ 4 levels; recursive readers stay safe. */
export const STRICT_JSON_MAX_DEPTH = 64;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** One open container: an object (its keys so far, the current one) or an array (the current index). */
interface Frame {
  readonly keys: Set<string> | null;
  key: string;
  index: number;
  /** The value of a `constructor` member: a `prototype` key in it is refused (prototype poisoning). */
  readonly underConstructor: boolean;
}

/**
 * R-WIRE-2: a request body as strict JSON — valid UTF-8 without a byte-order mark, no unpaired
 * surrogate (escaped or not), no duplicate key at any depth, no `__proto__` or
 * `constructor.prototype` key, at most STRICT_JSON_MAX_DEPTH levels. A refusal is a ValidationError
 * whose field is the JSON path of the offending member (`capabilities.labels.zone`, `gpus[1].model`).
 */
export function parseStrictJson(bytes: Uint8Array): unknown {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
    throw new ValidationError('body', 'byte_order_mark');
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new ValidationError('body', 'invalid_utf8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ValidationError('body', 'invalid_json');
  }
  // JSON.parse has proved the syntax, so this pass only tracks strings, containers and commas.
  checkMembers(text);
  return value;
}

function checkMembers(text: string): void {
  const stack: Frame[] = [];
  let expectKey = false;
  let nextBackslash = text.indexOf('\\');
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // indexOf is native: a 4 KiB string costs one call, not 4096 loop turns.
      let end = text.indexOf('"', i + 1);
      while (escapedAt(text, end)) end = text.indexOf('"', end + 1);
      if (nextBackslash !== -1 && nextBackslash < i) nextBackslash = text.indexOf('\\', i);
      const escaped = nextBackslash !== -1 && nextBackslash < end;
      const top = stack[stack.length - 1];
      if (expectKey && top?.keys) {
        const key = escaped ? (JSON.parse(text.slice(i, end + 1)) as string) : text.slice(i + 1, end);
        top.key = key;
        if (top.keys.has(key)) throw new ValidationError(pathOf(stack), 'duplicate_key');
        top.keys.add(key);
        if (key === '__proto__' || (key === 'prototype' && top.underConstructor))
          throw new ValidationError(pathOf(stack), 'forbidden_key');
        if (escaped && UNPAIRED_SURROGATE.test(key))
          throw new ValidationError(pathOf(stack), 'unpaired_surrogate');
        expectKey = false;
      } else if (escaped && UNPAIRED_SURROGATE.test(JSON.parse(text.slice(i, end + 1)) as string)) {
        throw new ValidationError(pathOf(stack), 'unpaired_surrogate');
      }
      i = end;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (stack.length === STRICT_JSON_MAX_DEPTH) throw new ValidationError(pathOf(stack), 'too_deep');
      const parent = stack[stack.length - 1];
      stack.push({
        keys: c === OPEN_OBJECT ? new Set() : null,
        key: '',
        index: 0,
        underConstructor: parent?.keys != null && parent.key === 'constructor',
      });
      expectKey = c === OPEN_OBJECT;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      stack.pop();
      expectKey = false;
    } else if (c === COMMA) {
      const top = stack[stack.length - 1]!;
      if (top.keys) expectKey = true;
      else top.index++;
    }
  }
}

/** The quote at `at` follows an odd number of backslashes. */
function escapedAt(text: string, at: number): boolean {
  let backslashes = 0;
  while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
  return backslashes % 2 === 1;
}

/** `a.b[2].c`; the body itself is `body`. */
function pathOf(stack: readonly Frame[]): string {
  let path = '';
  for (const frame of stack) {
    if (frame.keys) path += path ? `.${frame.key}` : frame.key;
    else path += `[${frame.index}]`;
  }
  return path || 'body';
}
