import fc from 'fast-check';
import { ValidationError } from '@ql/domain';
import { STRICT_JSON_MAX_DEPTH, parseStrictJson } from './strict-json';

const bytes = (text: string) => Buffer.from(text, 'utf8');
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('parseStrictJson', () => {
  it.each<[string, Buffer, unknown]>([
    ['an object', bytes('{"a":1,"b":[true,null,"x"]}'), { a: 1, b: [true, null, 'x'] }],
    ['a bare value', bytes(' 42 '), 42],
    ['the same key in sibling objects', bytes('{"a":{"k":1},"b":{"k":2}}'), { a: { k: 1 }, b: { k: 2 } }],
    ['the same key in each object of an array', bytes('[{"k":1},{"k":2}]'), [{ k: 1 }, { k: 2 }]],
    ['a key that only differs by case', bytes('{"k":1,"K":2}'), { k: 1, K: 2 }],
    ['structure characters inside strings', bytes('{"a":"{[,\\"]}","b":","}'), { a: '{[,"]}', b: ',' }],
    ['a key named like a member path', bytes('{"a.b":1,"a":{"b":2}}'), { 'a.b': 1, a: { b: 2 } }],
    [
      'strings that end in an escaped backslash',
      bytes('{"k\\\\":"v\\\\","j":"\\"x"}'),
      { 'k\\': 'v\\', j: '"x' },
    ],
    ['an escaped surrogate pair', bytes('{"e":"\\ud83d\\ude00"}'), { e: '😀' }],
    ['raw multi-byte characters', bytes('{"zone":"東京-🚀"}'), { zone: '東京-🚀' }],
    ['a byte-order mark inside a string', bytes('{"a":"\uFEFF"}'), { a: '\uFEFF' }],
    ['a constructor member that is not an object', bytes('{"constructor":1}'), { constructor: 1 }],
    [`${STRICT_JSON_MAX_DEPTH} levels`, bytes(nested(STRICT_JSON_MAX_DEPTH)), expect.any(Array)],
  ])('accepts %s', (_name, body, expected) => {
    expect(parseStrictJson(body)).toEqual(expected);
  });

  it.each<[string, Buffer, string, string]>([
    ['a duplicate key', bytes('{"a":1,"a":2}'), 'a', 'duplicate_key'],
    [
      'a nested duplicate key',
      bytes('{"capabilities":{"labels":{"zone":"a","zone":"b"}}}'),
      'capabilities.labels.zone',
      'duplicate_key',
    ],
    [
      'a duplicate key in an object in an array',
      bytes('{"gpus":[{"model":"a"},{"model":"b","model":"c"}]}'),
      'gpus[1].model',
      'duplicate_key',
    ],
    [
      'a duplicate spelled with an escape',
      bytes('{"role":"viewer","r\\u006fle":"admin"}'),
      'role',
      'duplicate_key',
    ],
    ['a duplicate key that ends in a backslash', bytes('{"k\\\\":1,"k\\\\":2}'), 'k\\', 'duplicate_key'],
    ['a duplicate whose values are containers', bytes('{"a":{},"a":[]}'), 'a', 'duplicate_key'],
    ['a duplicate after a nested object', bytes('[0,{"x":{"y":1},"x":2}]'), '[1].x', 'duplicate_key'],
    ['a __proto__ key', bytes('{"a":{"__proto__":{"admin":true}}}'), 'a.__proto__', 'forbidden_key'],
    ['an escaped __proto__ key', bytes('{"\\u005f_proto__":{}}'), '__proto__', 'forbidden_key'],
    [
      'a constructor.prototype key',
      bytes('{"constructor":{"prototype":{}}}'),
      'constructor.prototype',
      'forbidden_key',
    ],
    [
      'invalid UTF-8',
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d]),
      'body',
      'invalid_utf8',
    ],
    ['an overlong encoding', Buffer.from([0x22, 0xc0, 0x80, 0x22]), 'body', 'invalid_utf8'],
    ['a UTF-8 encoded surrogate', Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22]), 'body', 'invalid_utf8'],
    ['a truncated sequence', Buffer.from([0x22, 0xe6, 0x9d, 0x22]), 'body', 'invalid_utf8'],
    [
      'a byte-order mark',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes('{}')]),
      'body',
      'byte_order_mark',
    ],
    [
      'an escaped lone high surrogate',
      bytes('{"labels":{"zone":"\\ud800"}}'),
      'labels.zone',
      'unpaired_surrogate',
    ],
    ['an escaped lone low surrogate', bytes('{"a":["ok","x\\udc00"]}'), 'a[1]', 'unpaired_surrogate'],
    ['an escaped pair in the wrong order', bytes('{"a":"\\udc00\\ud800"}'), 'a', 'unpaired_surrogate'],
    ['a high surrogate before a plain character', bytes('{"a":"\\ud800x"}'), 'a', 'unpaired_surrogate'],
    ['a lone surrogate in a key', bytes('{"k\\ud800":1}'), 'k\ud800', 'unpaired_surrogate'],
    ['a lone surrogate as the body', bytes('"\\udfff"'), 'body', 'unpaired_surrogate'],
    [
      'one level too deep',
      bytes(nested(STRICT_JSON_MAX_DEPTH + 1)),
      `[0]`.repeat(STRICT_JSON_MAX_DEPTH),
      'too_deep',
    ],
    [
      'deep nesting in an object',
      bytes(`{"a":${nested(100_000)}}`),
      `a${'[0]'.repeat(STRICT_JSON_MAX_DEPTH - 1)}`,
      'too_deep',
    ],
    ['invalid JSON', bytes('{"a":'), 'body', 'invalid_json'],
    ['trailing text', bytes('{} {}'), 'body', 'invalid_json'],
    ['an empty body', bytes(''), 'body', 'invalid_json'],
  ])('refuses %s', (_name, body, field, rule) => {
    let error: unknown;
    try {
      parseStrictJson(body);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect({ field: (error as ValidationError).field, rule: (error as ValidationError).rule }).toEqual({
      field,
      rule,
    });
  });
});

describe('parseStrictJson, properties', () => {
  // Any well-formed text: a duplicate or forbidden key could only come from the generator by chance.
  const plain = (value: unknown) => !/"(__proto__|prototype)"/.test(JSON.stringify(value));
  const values = fc.jsonValue({ stringUnit: 'grapheme', maxDepth: 6 }).filter(plain);

  it('reads any JSON that JSON.stringify writes exactly as JSON.parse does', () => {
    fc.assert(
      fc.property(values, (value) => {
        const text = JSON.stringify(value);
        expect(parseStrictJson(bytes(text))).toEqual(JSON.parse(text));
      }),
    );
  });

  it('refuses any object once one of its keys is written twice, naming that key', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ unit: 'grapheme', minLength: 1 }), values, { minKeys: 1 }).filter(plain),
        fc.nat(),
        (object, pick) => {
          const keys = Object.keys(object);
          const key = keys[pick % keys.length]!;
          const text = `{${JSON.stringify(key)}:null,${JSON.stringify(object).slice(1)}`;
          expect(() => parseStrictJson(bytes(text))).toThrow(new ValidationError(key, 'duplicate_key'));
        },
      ),
    );
  });
});
