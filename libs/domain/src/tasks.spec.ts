import { ValidationError } from './errors';
import { TASK_LIMITS, parseTaskSpec, retryBackoffMs } from './tasks';

const base = { name: 'backup', command: 'tar czf /tmp/x.tgz /etc', runtime: 'shell' };

function rule(input: unknown): string {
  try {
    parseTaskSpec(input);
  } catch (error) {
    if (error instanceof ValidationError) return `${error.field}:${error.rule}`;
    throw error;
  }
  return 'accepted';
}

describe('parseTaskSpec (R-RUN-1)', () => {
  it('fills defaults and makes one canonical form with a stable digest', () => {
    const a = parseTaskSpec(base);
    expect(a.spec).toMatchObject({
      executor: 'local-process',
      timeoutMs: TASK_LIMITS.defaultTimeoutMs,
      retry: null,
      env: {},
      cron: null,
      priority: 0,
    });
    const b = parseTaskSpec({
      runtime: 'shell',
      command: base.command,
      name: 'backup',
      env: {},
      executor: 'local-process',
    });
    expect(b.digest).toBe(a.digest);
    expect(parseTaskSpec(a.spec).canonical).toBe(a.canonical);
    expect(parseTaskSpec({ ...base, command: 'tar czf /tmp/y.tgz /etc' }).digest).not.toBe(a.digest);
    expect(a.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it('names people write are accepted (QingLong titles, emoji, accents) and kept in NFC', () => {
    for (const name of [
      '京东签到',
      '东东农场 🌾 每日浇水',
      'jd_bean_change',
      'Café-Réveil 07:00',
      '-x',
      '签'.repeat(TASK_LIMITS.nameLength),
      '🫘'.repeat(96),
    ])
      expect({ name, spec: parseTaskSpec({ ...base, name }).spec.name }).toEqual({ name, spec: name });
    // "é" as e + combining accent (NFD) is stored as the one character é: one name, not two lookalikes.
    expect(parseTaskSpec({ ...base, name: 'Cafe\u0301' }).spec.name).toBe('Caf\u00e9');
  });

  it('multi-line commands with tabs are fine; other control characters are not', () => {
    expect(rule({ ...base, command: 'set -e\n\techo a\r\necho b' })).toBe('accepted');
    expect(rule({ ...base, command: 'echo \u0000' })).toBe('command:control_character');
    expect(rule({ ...base, command: 'echo \u001b[31m' })).toBe('command:control_character');
  });

  it.each([
    [{ ...base, extra: 1 }, 'extra:unknown_field'],
    [{ ...base, runtime: 'ruby' }, 'runtime:must_be_one_of:shell|node|python'],
    [{ ...base, executor: 'docker' }, 'executor:must_be_one_of:local-process'],
    [{ ...base, name: '' }, 'name:too_short'],
    [{ ...base, name: '京东\u202e签到' }, 'name:format_character'], // a bidi override
    [{ ...base, name: '京东\u200b签到' }, 'name:format_character'], // zero-width space
    [{ ...base, name: '\ufeff京东签到' }, 'name:format_character'], // a BOM
    [{ ...base, name: '京东\ue000' }, 'name:format_character'], // private use
    [{ ...base, name: '京东\t签到' }, 'name:control_character'],
    [{ ...base, name: '京东\u2028签到' }, 'name:control_character'], // line separator
    [{ ...base, name: '京东\ud800' }, 'name:unpaired_surrogate'],
    [{ ...base, name: ' 京东签到' }, 'name:surrounding_space'],
    [{ ...base, name: '京东签到\u3000' }, 'name:surrounding_space'], // an ideographic space
    [{ ...base, name: '签'.repeat(TASK_LIMITS.nameLength + 1) }, 'name:too_long'],
    [{ ...base, name: '🫘'.repeat(97) }, 'name:too_long'], // 97 characters, but 388 bytes of UTF-8
    [{ ...base, command: 'x'.repeat(TASK_LIMITS.commandBytes + 1) }, 'command:too_long'],
    [{ ...base, command: 'é'.repeat(TASK_LIMITS.commandBytes / 2 + 1) }, 'command:too_long'],
    [{ ...base, timeoutMs: 999 }, 'timeoutMs:out_of_range'],
    [{ ...base, timeoutMs: 1.5 }, 'timeoutMs:must_be_integer'],
    [{ ...base, retry: { maxAttempts: 1, initialBackoffMs: 1000 } }, 'retry.maxAttempts:out_of_range'],
    [{ ...base, retry: { maxAttempts: 3, initialBackoffMs: 10 } }, 'retry.initialBackoffMs:out_of_range'],
    [
      { ...base, retry: { maxAttempts: 3, initialBackoffMs: 1000, jitter: true } },
      'retry.jitter:unknown_field',
    ],
    [{ ...base, env: { 'BAD-KEY': 'x' } }, 'env.<key>:invalid_format'],
    [
      { ...base, env: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`K${i}`, 'v'])) },
      'env:too_many_items',
    ],
    [{ ...base, cron: '61 * * * *' }, 'cron:invalid_cron'],
    [{ ...base, cron: '0 8 * * *', timezone: 'Mars/Base' }, 'timezone:invalid_timezone'],
    [{ ...base, cron: '0 8 * * *', timezone: '+08:00' }, 'timezone:invalid_timezone'],
    [{ ...base, timezone: 'Asia/Shanghai' }, 'timezone:requires_cron'],
    [{ ...base, cron: null, timezone: 'Asia/Shanghai' }, 'timezone:requires_cron'],
    [{ ...base, priority: 1001 }, 'priority:out_of_range'],
    [{ ...base, placement: { required: { colour: ['red'] } } }, 'placement.required.colour:unknown_field'],
    [[], ':must_be_object'],
  ])('%j → %s', (input, expected) => {
    expect(rule(input)).toBe(expected);
  });

  it('a zone is part of the revision; UTC is the default and is left out, so older digests hold', () => {
    const utc = parseTaskSpec({ ...base, cron: '0 0 8 * * *' });
    expect(utc.spec).not.toHaveProperty('timezone');
    expect(utc.canonical).not.toContain('timezone');
    for (const zone of [null, 'UTC', 'utc']) {
      expect(parseTaskSpec({ ...base, cron: '0 0 8 * * *', timezone: zone }).digest).toBe(utc.digest);
    }
    expect(rule({ ...base, timezone: 'UTC' })).toBe('accepted');
    const shanghai = parseTaskSpec({ ...base, cron: '0 0 8 * * *', timezone: 'Asia/Shanghai' });
    expect(shanghai.spec.timezone).toBe('Asia/Shanghai');
    expect(shanghai.digest).not.toBe(utc.digest);
    // The worker re-parses the pinned spec from the offer: it must come out the same.
    expect(parseTaskSpec(JSON.parse(shanghai.canonical)).digest).toBe(shanghai.digest);
  });

  it('the cron is checked in its zone and its refusal says why', () => {
    expect(() => parseTaskSpec({ ...base, cron: '0 8 * * MOM', timezone: 'Asia/Shanghai' })).toThrow(
      'cron: invalid_cron: day-of-week field "MOM": "MOM" is not a number 0-7 or a name SUN-SAT',
    );
  });

  it('the whole spec stays under the offer budget', () => {
    const env = Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`K${i}`, 'v'.repeat(4096)]));
    expect(rule({ ...base, command: 'x'.repeat(TASK_LIMITS.commandBytes), env })).toBe('accepted');
    expect(rule({ ...base, env: { ...env, K7: 'v'.repeat(4096) } })).toBe('env:too_large');
  });
});

describe('retryBackoffMs', () => {
  it('grows by the multiplier from attempt 2 and is capped', () => {
    const policy = { maxAttempts: 10, initialBackoffMs: 1000, multiplier: 2, maxBackoffMs: 5000 };
    expect([2, 3, 4, 5].map((n) => retryBackoffMs(policy, n))).toEqual([1000, 2000, 4000, 5000]);
  });
});
