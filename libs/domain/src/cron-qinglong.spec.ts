import fc from 'fast-check';
import { CronSchedule, nextFireTime, parseCron, previousFireTime } from './cron';
import { parseTimezone, zoneOffsetMs } from './cron-zone';
import { ValidationError } from './errors';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
const at = (text: string): number => Date.parse(text);

function refusal(fn: () => unknown): { field: string; rule: string; message: string } | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    if (e instanceof ValidationError) return { field: e.field, rule: e.rule, message: e.message };
    throw e;
  }
}

describe('what QingLong users write', () => {
  it.each<[string, string, Partial<CronSchedule>]>([
    ['six fields, seconds first', '0 0 8 * * *', { seconds: [0], minutes: [0], hours: [8] }],
    ['a seconds step', '*/30 * * * * *', { seconds: [0, 30] }],
    ['seconds 10 apart', '*/10 * * * * *', { seconds: [0, 10, 20, 30, 40, 50] }],
    ['five fields fire at second 0', '0 8 * * *', { seconds: [0] }],
    ['a day name', '0 8 * * MON', { daysOfWeek: [1], dayOfWeekRestricted: true }],
    ['day names in any case, in a range', '0 8 * * mon-Fri', { daysOfWeek: [1, 2, 3, 4, 5] }],
    ['a range ending on SUN', '0 8 * * FRI-SUN', { daysOfWeek: [0, 5, 6] }],
    ['day names in a list', '0 8 * * SAT,sun', { daysOfWeek: [0, 6] }],
    ['month names', '0 0 1 jan,JUL-sep *', { months: [1, 7, 8, 9] }],
    ['a month name with a step', '0 0 1 FEB/3 *', { months: [2, 5, 8, 11] }],
    ['? for a day field', '0 0 8 ? * MON', { dayOfMonthRestricted: false, dayOfWeekRestricted: true }],
  ])('accepts %s: %s', (_name, expression, expected) => {
    expect(parseCron(expression)).toMatchObject({ expression, timezone: 'UTC', ...expected });
  });

  it('fires `0 0 8 * * *` at 08:00:00 and `*/30 * * * * *` on the half minute', () => {
    expect(iso(nextFireTime(parseCron('0 0 8 * * *'), at('2024-01-01T08:00:00Z')))).toBe(
      '2024-01-02T08:00:00.000Z',
    );
    expect(iso(nextFireTime(parseCron('*/30 * * * * *'), at('2024-01-01T08:00:00.500Z')))).toBe(
      '2024-01-01T08:00:30.000Z',
    );
    expect(iso(previousFireTime(parseCron('15 * * * * *'), at('2024-01-01T08:00:14.999Z')))).toBe(
      '2024-01-01T07:59:15.000Z',
    );
    // 2024-01-01 is a Monday.
    expect(iso(nextFireTime(parseCron('0 8 * * MON'), at('2024-01-01T08:00:00Z')))).toBe(
      '2024-01-08T08:00:00.000Z',
    );
  });

  it.each<[string, string, string]>([
    [
      '4 fields',
      '* * * *',
      'expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got 4',
    ],
    ['a bad day name', '0 8 * * MOM', 'day-of-week field "MOM": "MOM" is not a number 0-7 or a name SUN-SAT'],
    ['minute 60', '60 * * * *', 'minute field "60": 60 is outside 0-59'],
    ['hour 24 with seconds', '0 0 24 * * *', 'hour field "24": 24 is outside 0-23'],
    ['a backwards range', '0 0 * * FRI-MON', 'day-of-week field "FRI-MON": the range FRI-MON runs backwards'],
    ['step 0', '*/0 * * * *', 'minute field "*/0": the step 0 is outside 1-60'],
    ['a hash', '0 0 * * 1#2', 'day-of-week field "1#2": "1#2" is not a value, a range a-b, * or a step /n'],
    ['seconds too close', '*/5 * * * * *', 'second field: times 5 s apart; at most one time every 10 s'],
    [
      '? in the hour field',
      '0 ? * * *',
      'hour field "?": "?" only stands for a whole day-of-month or day-of-week field',
    ],
  ])('refuses %s as invalid_cron and says why', (_name, expression, why) => {
    const r = refusal(() => parseCron(expression));
    expect(r).toMatchObject({ field: 'cron', rule: 'invalid_cron' });
    expect(r!.message).toContain(`cron: invalid_cron: ${why}`);
  });
});

describe('time zones', () => {
  it.each<[string, string]>([
    ['Asia/Shanghai', 'Asia/Shanghai'],
    ['asia/shanghai', 'asia/shanghai'],
    ['America/Argentina/Buenos_Aires', 'America/Argentina/Buenos_Aires'],
    ['Etc/GMT-8', 'Etc/GMT-8'],
    ['utc', 'UTC'],
  ])('accepts %s', (zone, kept) => {
    expect(parseTimezone(zone)).toBe(kept);
  });

  it.each<[string, unknown]>([
    ['an unknown zone', 'Mars/Olympus_Mons'],
    ['a numeric offset', '+08:00'],
    ['an empty name', ''],
    ['a number', 8],
    ['a long name', `A/${'b'.repeat(63)}`],
  ])('refuses %s as invalid_timezone', (_name, zone) => {
    expect(refusal(() => parseTimezone(zone))).toMatchObject({ field: 'timezone', rule: 'invalid_timezone' });
    expect(refusal(() => parseCron('0 8 * * *', 'cron', zone))).toMatchObject({ rule: 'invalid_timezone' });
  });

  it.each<[string, string, string, string, string | null]>([
    [
      '08:00 in Shanghai is 00:00 UTC',
      '0 0 8 * * *',
      'Asia/Shanghai',
      '2024-06-01T00:00:00Z',
      '2024-06-02T00:00:00.000Z',
    ],
    [
      'Mondays are Shanghai Mondays',
      '0 7 * * MON',
      'Asia/Shanghai',
      '2024-01-01T00:00:00Z',
      '2024-01-07T23:00:00.000Z',
    ],
    ['winter in Berlin', '30 2 * * *', 'Europe/Berlin', '2024-03-30T00:00:00Z', '2024-03-30T01:30:00.000Z'],
    // 31 March 2024: Berlin's clock jumps 02:00 → 03:00, so 02:30 fires at the jump (03:00 CEST).
    [
      'a skipped time fires at the jump',
      '30 2 * * *',
      'Europe/Berlin',
      '2024-03-30T12:00:00Z',
      '2024-03-31T01:00:00.000Z',
    ],
    [
      'the day after the jump',
      '30 2 * * *',
      'Europe/Berlin',
      '2024-03-31T01:00:00Z',
      '2024-04-01T00:30:00.000Z',
    ],
    // 27 October 2024: 03:00 CEST → 02:00 CET, so 02:30 happens twice; it fires at the first only.
    [
      'a repeated time fires at its first occurrence',
      '30 2 * * *',
      'Europe/Berlin',
      '2024-10-26T12:00:00Z',
      '2024-10-27T00:30:00.000Z',
    ],
    [
      'and not at its second',
      '30 2 * * *',
      'Europe/Berlin',
      '2024-10-27T00:30:00Z',
      '2024-10-28T01:30:00.000Z',
    ],
    [
      'New York hourly over the fall back',
      '0 * * * *',
      'America/New_York',
      '2024-11-03T05:00:00Z',
      '2024-11-03T07:00:00.000Z',
    ],
    [
      'Lord Howe skips half an hour',
      '15 2 * * *',
      'Australia/Lord_Howe',
      '2024-10-05T12:00:00Z',
      '2024-10-05T15:30:00.000Z',
    ],
  ])('%s: %s in %s after %s', (_name, expression, zone, after, expected) => {
    expect(iso(nextFireTime(parseCron(expression, 'cron', zone), at(after)))).toBe(expected);
  });

  it('a yearly time across an offset change is found both ways (366 days and an hour apart)', () => {
    // 29 March 00:00 in Berlin: CEST in 2023 (after the change on the 26th), CET in 2024 (before the 31st).
    const yearly = parseCron('0 0 29 MAR *', 'cron', 'Europe/Berlin');
    expect(iso(nextFireTime(yearly, at('2023-03-28T22:00:00Z')))).toBe('2024-03-28T23:00:00.000Z');
    expect(iso(previousFireTime(yearly, at('2024-03-28T22:59:59Z')))).toBe('2023-03-28T22:00:00.000Z');
  });

  it('previousFireTime mirrors the DST decisions', () => {
    const berlin = parseCron('30 2 * * *', 'cron', 'Europe/Berlin');
    expect(iso(previousFireTime(berlin, at('2024-03-31T01:00:00Z')))).toBe('2024-03-31T01:00:00.000Z');
    expect(iso(previousFireTime(berlin, at('2024-03-31T00:59:59Z')))).toBe('2024-03-30T01:30:00.000Z');
    expect(iso(previousFireTime(berlin, at('2024-10-27T01:45:00Z')))).toBe('2024-10-27T00:30:00.000Z');
  });
});

/** Local wall-clock fields of an instant in a zone, by Intl (independent of the schedule code). */
function wall(zone: string, ms: number) {
  const d = new Date(ms + zoneOffsetMs(zone, ms));
  return {
    second: d.getUTCSeconds(),
    minute: d.getUTCMinutes(),
    hour: d.getUTCHours(),
    dom: d.getUTCDate(),
    month: d.getUTCMonth() + 1,
    dow: d.getUTCDay(),
  };
}

function matchesWall(s: CronSchedule, w: ReturnType<typeof wall>): boolean {
  if (!s.seconds.includes(w.second) || !s.minutes.includes(w.minute) || !s.hours.includes(w.hour))
    return false;
  if (!s.months.includes(w.month)) return false;
  const dom = s.daysOfMonth.includes(w.dom);
  const dow = s.daysOfWeek.includes(w.dow);
  return s.dayOfMonthRestricted && s.dayOfWeekRestricted ? dom || dow : dom && dow;
}

const ZONES = [
  'UTC',
  'Asia/Shanghai',
  'Europe/Berlin',
  'America/New_York',
  'Australia/Lord_Howe',
  'Asia/Kolkata',
];
const pick = <T>(values: readonly T[]) => fc.constantFrom(...values);
const arbExpression = fc
  .tuple(
    pick(['0', '*/15', '0,30', '*/10']),
    pick(['*', '0', '*/7', '15,45', '30']),
    pick(['*', '2', '1-3', '*/6', '23', '0']),
    pick(['*', '1', '15', '31', '1-7', '29']),
    pick(['*', 'MAR', 'OCT-DEC', 'jan,jul', '*/2']),
    pick(['*', 'SUN', 'mon-fri', '?', '6']),
  )
  .map((f) => f.join(' '));
// Around the 2020s' DST changes and well away from them.
const arbTime = fc.integer({ min: at('2023-01-01T00:00:00Z'), max: at('2027-01-01T00:00:00Z') });

describe('zoned fire time properties', () => {
  it('next > from, previous <= at; each is the wall time it claims, or the instant of a jump', () => {
    fc.assert(
      fc.property(arbExpression, pick(ZONES), arbTime, (expression, zone, t) => {
        const s = parseCron(expression, 'cron', zone);
        const next = nextFireTime(s, t);
        const prev = previousFireTime(s, t);
        for (const fire of [next, prev]) {
          if (fire === null) continue;
          expect(fire % 1000).toBe(0);
          // A fire either shows a matching wall time, or is a jump instant (the offset changed just then)
          // standing in for a skipped wall time.
          const jumped = zoneOffsetMs(zone, fire - 1000) !== zoneOffsetMs(zone, fire);
          if (!jumped) expect(matchesWall(s, wall(zone, fire))).toBe(true);
        }
        if (next !== null) {
          expect(next).toBeGreaterThan(t);
          if (prev !== null) expect(nextFireTime(s, prev) ?? Number.NaN).toBeLessThanOrEqual(next);
          expect(previousFireTime(s, next)).toBe(next);
        }
        if (prev !== null) expect(prev).toBeLessThanOrEqual(t);
      }),
      { numRuns: 300 },
    );
  });

  it('a zone without DST is the UTC schedule shifted by its offset', () => {
    fc.assert(
      fc.property(arbExpression, arbTime, (expression, t) => {
        const shanghai = nextFireTime(parseCron(expression, 'cron', 'Asia/Shanghai'), t);
        const utc = nextFireTime(parseCron(expression), t + 8 * 3_600_000);
        expect(shanghai).toBe(utc === null ? null : utc - 8 * 3_600_000);
      }),
      { numRuns: 200 },
    );
  });
});
