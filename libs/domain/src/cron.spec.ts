import fc from 'fast-check';
import { CronSchedule, nextFireTime, parseCron, previousFireTime } from './cron';
import { ValidationError } from './errors';

const MINUTE = 60_000;
const DAY = 86_400_000;
const utc = (iso: string): number => Date.parse(`${iso}Z`);
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
const range = (from: number, to: number, step = 1): number[] => {
  const out: number[] = [];
  for (let v = from; v <= to; v += step) out.push(v);
  return out;
};

function failure(fn: () => unknown): { field: string; rule: string } | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    if (e instanceof ValidationError) return { field: e.field, rule: e.rule };
    throw e;
  }
}

describe('parseCron', () => {
  it.each<[string, Partial<CronSchedule>]>([
    [
      '* * * * *',
      {
        minutes: range(0, 59),
        hours: range(0, 23),
        daysOfMonth: range(1, 31),
        months: range(1, 12),
        daysOfWeek: range(0, 6),
        dayOfMonthRestricted: false,
        dayOfWeekRestricted: false,
      },
    ],
    ['*/15 * * * *', { minutes: [0, 15, 30, 45] }],
    ['5-10/2 * * * *', { minutes: [5, 7, 9] }],
    ['50/4 * * * *', { minutes: [50, 54, 58] }],
    ['7 * * * *', { minutes: [7] }],
    ['05 * * * *', { minutes: [5] }],
    ['1,3-4,*/20,3 * * * *', { minutes: [0, 1, 3, 4, 20, 40] }],
    ['0 0-23/6 * * *', { hours: [0, 6, 12, 18] }],
    ['0 0 31 * *', { daysOfMonth: [31], dayOfMonthRestricted: true, dayOfWeekRestricted: false }],
    ['0 0 * 2,12 *', { months: [2, 12] }],
    ['0 0 * * 7', { daysOfWeek: [0], dayOfMonthRestricted: false, dayOfWeekRestricted: true }],
    ['0 0 * * 0,7', { daysOfWeek: [0] }],
    ['0 0 * * 5-7', { daysOfWeek: [0, 5, 6] }],
    ['0 0 * * 1/2', { daysOfWeek: [0, 1, 3, 5] }],
    ['0 0 * * */2', { daysOfWeek: [0, 2, 4, 6], dayOfWeekRestricted: true }],
    ['0 0 1-31 * *', { daysOfMonth: range(1, 31), dayOfMonthRestricted: true }],
    ['*/15   *\t* *  *', { minutes: [0, 15, 30, 45] }],
    ['59 23 31 12 7', { minutes: [59], hours: [23], daysOfMonth: [31], months: [12], daysOfWeek: [0] }],
  ])('parses %j', (expression, expected) => {
    const schedule = parseCron(expression);
    expect(schedule).toMatchObject({ expression, ...expected });
  });

  it('accepts 100 characters and no more', () => {
    const fourFields = `${range(0, 31).join(',')} * * *`;
    const hundred = `${fourFields}${' '.repeat(100 - fourFields.length - 1)}*`;
    expect(hundred).toHaveLength(100);
    expect(parseCron(hundred).minutes).toEqual(range(0, 31));
    const hundredAndOne = `${fourFields}${' '.repeat(100 - fourFields.length)}*`;
    expect(failure(() => parseCron(hundredAndOne))).toEqual({ field: 'cron', rule: 'invalid_cron' });
  });

  it.each<[string, unknown]>([
    ['not a string', 5],
    ['null', null],
    ['empty', ''],
    ['four fields', '* * * *'],
    ['seven fields', '0 0 * * * * *'],
    ['leading space', ' * * * * *'],
    ['trailing space', '* * * * * '],
    ['newline between fields', '* * * *\n*'],
    ['minute 60', '60 * * * *'],
    ['hour 24', '0 24 * * *'],
    ['day of month 0', '0 0 0 * *'],
    ['day of month 32', '0 0 32 * *'],
    ['month 0', '0 0 * 0 *'],
    ['month 13', '0 0 * 13 *'],
    ['day of week 8', '0 0 * * 8'],
    ['an unknown day name', '0 0 * * MOM'],
    ['a day name in the month field', '0 0 * MON *'],
    ['a month name in the day-of-week field', '0 0 * * JAN'],
    ['a name in the minute field', 'JAN 0 * * *'],
    ['a full day name', '0 0 * * MONDAY'],
    ['question mark in the minute field', '? 0 * * *'],
    ['second 60', '60 0 0 * * *'],
    ['seconds 5 apart', '*/5 * * * * *'],
    ['seconds 9 apart over the minute', '0,51 * * * * *'],
    ['L', '0 0 L * *'],
    ['W', '0 0 15W * *'],
    ['hash', '0 0 * * 1#2'],
    ['step 0', '*/0 * * * *'],
    ['step over the range', '*/61 * * * *'],
    ['reversed range', '10-5 * * * *'],
    ['range above max', '50-60 * * * *'],
    ['open range', '5- * * * *'],
    ['negative number', '-5 * * * *'],
    ['empty list item', '1,,2 * * * *'],
    ['trailing comma', '1, * * * *'],
    ['double step', '*/2/3 * * * *'],
    ['star range', '*-5 * * * *'],
    ['three digits', '005 * * * *'],
    ['decimal', '1.5 * * * *'],
    ['over 100 characters', `${'0,'.repeat(46)}0     * * * *`],
  ])('rejects %s', (_name, expression) => {
    expect(failure(() => parseCron(expression))).toEqual({ field: 'cron', rule: 'invalid_cron' });
  });

  it('uses the field name it is given', () => {
    expect(failure(() => parseCron('bad', 'task.cron'))).toEqual({
      field: 'task.cron',
      rule: 'invalid_cron',
    });
  });
});

describe('nextFireTime', () => {
  it.each<[string, string, string, string | null]>([
    ['every 15 minutes, on a boundary', '*/15 * * * *', '2024-01-01T00:00:00', '2024-01-01T00:15:00.000Z'],
    ['every 15 minutes, just before', '*/15 * * * *', '2024-01-01T00:14:59.999', '2024-01-01T00:15:00.000Z'],
    ['every 15 minutes, over midnight', '*/15 * * * *', '2024-01-01T23:50:00', '2024-01-02T00:00:00.000Z'],
    ['stepped range, within the hour', '5-10/2 * * * *', '2024-01-01T00:05:00', '2024-01-01T00:07:00.000Z'],
    ['stepped range, next hour', '5-10/2 * * * *', '2024-01-01T00:09:00', '2024-01-01T01:05:00.000Z'],
    ['every minute, mid-minute', '* * * * *', '2024-01-01T00:00:30', '2024-01-01T00:01:00.000Z'],
    ['first of month over a month end', '0 0 1 * *', '2024-01-31T23:59:00', '2024-02-01T00:00:00.000Z'],
    ['31st skips a 30-day month', '0 0 31 * *', '2024-04-01T00:00:00', '2024-05-31T00:00:00.000Z'],
    ['31st skips February', '0 0 31 * *', '2024-01-31T00:00:00', '2024-03-31T00:00:00.000Z'],
    ['30 February never', '0 0 30 2 *', '2024-01-01T00:00:00', null],
    ['31 April never', '0 0 31 4 *', '2024-01-01T00:00:00', null],
    ['leap day in the coming year', '0 0 29 2 *', '2023-06-01T00:00:00', '2024-02-29T00:00:00.000Z'],
    ['leap day four years on', '0 0 29 2 *', '2024-02-29T00:00:00', '2028-02-29T00:00:00.000Z'],
    ['28 February every year', '0 0 28 2 *', '2024-02-28T00:00:00', '2025-02-28T00:00:00.000Z'],
    ['yearly, exactly 366 days on', '0 0 1 1 *', '2024-01-01T00:00:00', '2025-01-01T00:00:00.000Z'],
    ['once a year, exactly a year on', '59 23 31 12 *', '2024-12-31T23:59:00', '2025-12-31T23:59:00.000Z'],
    ['dom OR dow: Friday before the 13th', '0 0 13 * 5', '2024-09-01T00:00:00', '2024-09-06T00:00:00.000Z'],
    ['dom OR dow: the 13th (also a Friday)', '0 0 13 * 5', '2024-09-06T00:00:00', '2024-09-13T00:00:00.000Z'],
    [
      'dom OR dow: a Sunday 1st before Monday',
      '0 0 1 * 1',
      '2025-05-27T00:00:00',
      '2025-06-01T00:00:00.000Z',
    ],
    ['dom OR dow with a stepped dow', '0 0 1 * */2', '2025-05-27T00:00:00', '2025-05-29T00:00:00.000Z'],
    ['dow only: Mondays in June', '0 0 * 6 1', '2025-05-27T00:00:00', '2025-06-02T00:00:00.000Z'],
    ['dow 7 is Sunday', '0 0 * * 7', '2025-05-27T00:00:00', '2025-06-01T00:00:00.000Z'],
    ['dom with full dow list is still OR', '0 0 31 * 0-6', '2025-05-27T00:00:00', '2025-05-28T00:00:00.000Z'],
    ['hour list', '30 9,17 * * *', '2024-01-01T09:30:00', '2024-01-01T17:30:00.000Z'],
    ['before 1970', '0 0 1 1 *', '1969-06-01T00:00:00', '1970-01-01T00:00:00.000Z'],
  ])('%s: %s after %s', (_name, expression, after, expected) => {
    expect(iso(nextFireTime(parseCron(expression), utc(after)))).toBe(expected);
  });
});

describe('previousFireTime', () => {
  it.each<[string, string, string, string | null]>([
    ['on a boundary it is the boundary', '*/15 * * * *', '2024-01-01T00:15:00', '2024-01-01T00:15:00.000Z'],
    ['just before a boundary', '*/15 * * * *', '2024-01-01T00:14:59.999', '2024-01-01T00:00:00.000Z'],
    ['over midnight', '*/15 * * * *', '2024-01-02T00:05:00', '2024-01-02T00:00:00.000Z'],
    ['stepped range, same hour', '5-10/2 * * * *', '2024-01-01T01:08:00', '2024-01-01T01:07:00.000Z'],
    ['stepped range, previous hour', '5-10/2 * * * *', '2024-01-01T01:04:00', '2024-01-01T00:09:00.000Z'],
    ['31st over a 30-day month', '0 0 31 * *', '2024-05-30T00:00:00', '2024-03-31T00:00:00.000Z'],
    ['last day of February in a leap year', '0 12 29 * *', '2024-03-28T00:00:00', '2024-02-29T12:00:00.000Z'],
    [
      '29th skips February in a common year',
      '0 12 29 * *',
      '2025-03-28T00:00:00',
      '2025-01-29T12:00:00.000Z',
    ],
    ['leap day within a year', '0 0 29 2 *', '2025-01-01T00:00:00', '2024-02-29T00:00:00.000Z'],
    ['leap day exactly 366 days back', '0 0 29 2 *', '2025-03-01T00:00:00', '2024-02-29T00:00:00.000Z'],
    ['leap day just over 366 days back', '0 0 29 2 *', '2025-03-01T00:00:00.001', null],
    ['once a year, 365 days back', '0 0 1 1 *', '2024-12-31T00:00:00', '2024-01-01T00:00:00.000Z'],
    ['dom OR dow', '0 0 13 * 5', '2024-09-12T00:00:00', '2024-09-06T00:00:00.000Z'],
    ['dow only', '0 0 * * 1', '2024-01-07T23:59:00', '2024-01-01T00:00:00.000Z'],
    ['never fires', '0 0 30 2 *', '2024-06-01T00:00:00', null],
  ])('%s: %s at %s', (_name, expression, at, expected) => {
    expect(iso(previousFireTime(parseCron(expression), utc(at)))).toBe(expected);
  });

  it('rejects a non-finite time', () => {
    expect(() => previousFireTime(parseCron('* * * * *'), Number.POSITIVE_INFINITY)).toThrow(RangeError);
    expect(() => nextFireTime(parseCron('* * * * *'), Number.NaN)).toThrow(RangeError);
  });
});

/** An independent minute-by-minute oracle over the parsed sets, with the dom/dow rule spelt out. */
function fires(s: CronSchedule, ms: number): boolean {
  const d = new Date(ms);
  if (d.getUTCSeconds() !== 0 || d.getUTCMilliseconds() !== 0) return false;
  if (!s.minutes.includes(d.getUTCMinutes()) || !s.hours.includes(d.getUTCHours())) return false;
  if (!s.months.includes(d.getUTCMonth() + 1)) return false;
  const dom = s.daysOfMonth.includes(d.getUTCDate());
  const dow = s.daysOfWeek.includes(d.getUTCDay());
  if (s.dayOfMonthRestricted && s.dayOfWeekRestricted) return dom || dow;
  return dom && dow;
}

const item = (min: number, max: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.constant('*'),
    fc.integer({ min, max }).map(String),
    fc
      .tuple(fc.integer({ min, max }), fc.integer({ min, max }))
      .map(([a, b]) => `${Math.min(a, b)}-${Math.max(a, b)}`),
    fc.integer({ min: 1, max: max - min + 1 }).map((s) => `*/${s}`),
    fc
      .tuple(
        fc.integer({ min, max }),
        fc.integer({ min, max }),
        fc.integer({ min: 1, max: Math.min(10, max - min + 1) }),
      )
      .map(([a, b, s]) => `${Math.min(a, b)}-${Math.max(a, b)}/${s}`),
    fc
      .tuple(fc.integer({ min, max }), fc.integer({ min: 1, max: Math.min(10, max - min + 1) }))
      .map(([n, s]) => `${n}/${s}`),
  );
const cronField = (min: number, max: number) =>
  fc.array(item(min, max), { minLength: 1, maxLength: 3 }).map((items) => items.join(','));
const arbSchedule = fc
  .tuple(cronField(0, 59), cronField(0, 23), cronField(1, 31), cronField(1, 12), cronField(0, 7))
  .map((fields) => parseCron(fields.join(' ')));
const arbTime = fc.integer({ min: utc('1990-01-01T00:00:00'), max: utc('2090-01-01T00:00:00') });

describe('fire time properties', () => {
  it('previous <= at < next, both on whole minutes and both real fire times', () => {
    fc.assert(
      fc.property(arbSchedule, arbTime, (s, at) => {
        const prev = previousFireTime(s, at);
        const next = nextFireTime(s, at);
        if (prev !== null) {
          expect(prev).toBeLessThanOrEqual(at);
          expect(prev).toBeGreaterThanOrEqual(at - 366 * DAY);
          expect(prev % MINUTE).toBe(0);
          expect(fires(s, prev)).toBe(true);
          // Nothing fires in (prev, at]: the next fire after prev is after at.
          const afterPrev = nextFireTime(s, prev);
          if (afterPrev !== null) expect(afterPrev).toBe(next);
        }
        if (next !== null) {
          expect(next).toBeGreaterThan(at);
          expect(next % MINUTE).toBe(0);
          expect(fires(s, next)).toBe(true);
          // Nothing fires in (at, next): the latest fire before next is at or before at.
          const beforeNext = previousFireTime(s, next - 1);
          if (beforeNext !== null) expect(beforeNext).toBeLessThanOrEqual(at);
          if (prev !== null && prev >= next - 1 - 366 * DAY) expect(beforeNext).toBe(prev);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with a minute-by-minute scan over the surrounding two days', () => {
    const window = 2 * 24 * 60;
    fc.assert(
      fc.property(arbSchedule, arbTime, (s, at) => {
        const base = Math.floor(at / MINUTE) * MINUTE;
        let scanNext: number | null = null;
        for (let i = 1; i <= window && scanNext === null; i++)
          if (fires(s, base + i * MINUTE)) scanNext = base + i * MINUTE;
        let scanPrev: number | null = null;
        for (let i = 0; i < window && scanPrev === null; i++)
          if (fires(s, base - i * MINUTE)) scanPrev = base - i * MINUTE;
        const next = nextFireTime(s, at);
        const prev = previousFireTime(s, at);
        if (scanNext !== null) expect(next).toBe(scanNext);
        else if (next !== null) expect(next).toBeGreaterThan(base + window * MINUTE);
        if (scanPrev !== null) expect(prev).toBe(scanPrev);
        else if (prev !== null) expect(prev).toBeLessThanOrEqual(base - window * MINUTE);
      }),
      { numRuns: 200 },
    );
  });

  it('is fast for a schedule that never fires', () => {
    const never = parseCron('0 0 30 2 *');
    const started = Date.now();
    for (let i = 0; i < 50; i++) {
      expect(nextFireTime(never, utc('2024-01-01T00:00:00') + i * MINUTE)).toBeNull();
      expect(previousFireTime(never, utc('2024-01-01T00:00:00') + i * MINUTE)).toBeNull();
    }
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
