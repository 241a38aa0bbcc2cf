import { DEFAULT_CRON_TIMEZONE, parseTimezone, wallToInstant, zoneDay } from './cron-zone';
import { ValidationError } from './errors';

/**
 * A parsed cron expression: five fields (`minute hour day-of-month month day-of-week`) or six with
 * seconds first (QingLong's form), evaluated as wall-clock times in `timezone` (UTC by default). Every
 * set is sorted ascending and holds no duplicates; day-of-week uses 0..6 with Sunday = 0 (7 in the
 * expression is folded into 0); five fields fire at second 0.
 */
export interface CronSchedule {
  readonly expression: string;
  readonly timezone: string;
  readonly seconds: readonly number[];
  readonly minutes: readonly number[];
  readonly hours: readonly number[];
  readonly daysOfMonth: readonly number[];
  readonly months: readonly number[];
  readonly daysOfWeek: readonly number[];
  /** The field is anything but a bare `*` or `?`: with both restricted a day matches when either matches. */
  readonly dayOfMonthRestricted: boolean;
  readonly dayOfWeekRestricted: boolean;
}

export const CRON_MAX_LENGTH = 100;
/**
 * Two fire times of a seconds field are at least this far apart: the cron tick (QL_CRON_TICK_MS,
 * 5 s by default) fires the latest time due, so a finer schedule would silently skip times.
 */
export const CRON_MIN_SECONDS_INTERVAL = 10;

const SECOND_MS = 1000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const DAY_SECONDS = 86_400;
const SEARCH_DAYS = 366;
/** Only a schedule pinned to 29 February can need more than a year (leap days are 4 years apart, 8 around 2100). */
const LEAP_DAY_SEARCH_DAYS = 5 * 366;
/**
 * In a zone a yearly time can be 366 days and an offset change apart in instants (29 March CEST one
 * year, CET the next): zoned searches reach one day further so such a schedule is never "none".
 */
const zoneSlackMs = (schedule: CronSchedule): number =>
  schedule.timezone === DEFAULT_CRON_TIMEZONE ? 0 : DAY_MS;

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

interface FieldRule {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  readonly names?: readonly string[];
  /** The value of names[0]: JAN is 1, SUN is 0. */
  readonly nameBase?: number;
}

const SECOND: FieldRule = { name: 'second', min: 0, max: 59 };
const FIVE_FIELDS: readonly FieldRule[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTH_NAMES, nameBase: 1 },
  { name: 'day-of-week', min: 0, max: 7, names: DAY_NAMES, nameBase: 0 },
];

const ITEM = /^(?:(\*)|([0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?)(?:\/([0-9]+))?$/;

/**
 * Parses a five- or six-field expression: numbers, `*`, ranges `a-b`, steps `/n`, lists `a,b`, names
 * JAN-DEC and SUN-SAT (any case) in the month and day-of-week fields, `?` for a whole day field. No
 * `L`, `W` or `#`. A refusal is `invalid_cron` with a message naming the field and why.
 */
export function parseCron(
  expression: unknown,
  field = 'cron',
  timezone: unknown = DEFAULT_CRON_TIMEZONE,
): CronSchedule {
  const fail = (why: string): never => {
    throw new ValidationError(field, 'invalid_cron', `${field}: invalid_cron: ${why}`);
  };
  if (typeof expression !== 'string') return fail('expected a string');
  if (expression.length > CRON_MAX_LENGTH) return fail(`longer than ${CRON_MAX_LENGTH} characters`);
  if (!/^[^ \t]+(?:[ \t]+[^ \t]+)*$/.test(expression))
    return fail('fields are separated by spaces or tabs, with none before the first or after the last');
  const parts = expression.split(/[ \t]+/);
  if (parts.length !== 5 && parts.length !== 6)
    return fail(
      `expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got ${parts.length}`,
    );
  const rules = parts.length === 6 ? [SECOND, ...FIVE_FIELDS] : FIVE_FIELDS;
  const sets = parts.map((part, i) => parseField(part, rules[i]!, fail));
  const seconds = parts.length === 6 ? sets.shift()! : [0];
  if (parts.length === 6) parts.shift();
  checkSecondsInterval(seconds, fail);
  const zone = parseTimezone(timezone);
  const daysOfWeek = [...new Set(sets[4]!.map((d) => d % 7))].sort((a, b) => a - b);
  return {
    expression,
    timezone: zone,
    seconds,
    minutes: sets[0]!,
    hours: sets[1]!,
    daysOfMonth: sets[2]!,
    months: sets[3]!,
    daysOfWeek,
    dayOfMonthRestricted: parts[2] !== '*' && parts[2] !== '?',
    dayOfWeekRestricted: parts[4] !== '*' && parts[4] !== '?',
  };
}

function parseField(text: string, rule: FieldRule, fail: (why: string) => never): number[] {
  const where = `${rule.name} field "${text}"`;
  if (text === '?') {
    if (rule.name !== 'day-of-month' && rule.name !== 'day-of-week')
      fail(`${where}: "?" only stands for a whole day-of-month or day-of-week field`);
    text = '*';
  }
  const values = new Set<number>();
  for (const item of text.split(',')) {
    const m = ITEM.exec(item);
    if (!m) return fail(`${where}: "${item}" is not a value, a range a-b, * or a step /n`);
    const [, star, first, last, stepText] = m;
    let from = rule.min;
    let to = rule.max;
    if (star === undefined) {
      from = value(first!, rule, where, fail, false);
      // `n/s` runs from n to the field's maximum; a bare `n` is the single value.
      to =
        last !== undefined ? value(last, rule, where, fail, true) : stepText !== undefined ? rule.max : from;
    }
    if (from > to) fail(`${where}: the range ${item} runs backwards`);
    const step = stepText === undefined ? 1 : Number(stepText);
    if (step < 1 || step > rule.max - rule.min + 1)
      fail(`${where}: the step ${stepText} is outside 1-${rule.max - rule.min + 1}`);
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return [...values].sort((a, b) => a - b);
}

function value(
  token: string,
  rule: FieldRule,
  where: string,
  fail: (why: string) => never,
  rangeEnd: boolean,
): number {
  if (/^[0-9]{1,2}$/.test(token)) {
    const n = Number(token);
    if (n < rule.min || n > rule.max) fail(`${where}: ${token} is outside ${rule.min}-${rule.max}`);
    return n;
  }
  const index = rule.names?.indexOf(token.toUpperCase()) ?? -1;
  if (index < 0) {
    const names = rule.names ? ` or a name ${rule.names[0]}-${rule.names[rule.names.length - 1]}` : '';
    return fail(`${where}: "${token}" is not a number ${rule.min}-${rule.max}${names}`);
  }
  // SUN ends a range as 7, so FRI-SUN is Friday to Sunday.
  if (rangeEnd && rule.name === 'day-of-week' && index === 0) return 7;
  return index + rule.nameBase!;
}

function checkSecondsInterval(seconds: readonly number[], fail: (why: string) => never): void {
  let shortest = 60 - seconds[seconds.length - 1]! + seconds[0]!;
  for (let i = 1; i < seconds.length; i++) shortest = Math.min(shortest, seconds[i]! - seconds[i - 1]!);
  if (seconds.length > 1 && shortest < CRON_MIN_SECONDS_INTERVAL)
    fail(
      `second field: times ${shortest} s apart; at most one time every ${CRON_MIN_SECONDS_INTERVAL} s (the cron tick fires the latest time due)`,
    );
}

function dayMatches(schedule: CronSchedule, dayWall: number): boolean {
  const date = new Date(dayWall);
  if (!schedule.months.includes(date.getUTCMonth() + 1)) return false;
  const dom = schedule.daysOfMonth.includes(date.getUTCDate());
  const dow = schedule.daysOfWeek.includes(date.getUTCDay());
  return schedule.dayOfMonthRestricted && schedule.dayOfWeekRestricted ? dom || dow : dom && dow;
}

function assertFinite(ms: number, name: string): void {
  if (!Number.isFinite(ms)) throw new RangeError(`${name} must be a finite epoch millisecond value`);
}

const floorDay = (ms: number): number => Math.floor(ms / DAY_MS) * DAY_MS;

/**
 * Latest fire time (epoch ms, whole second) <= atMs and no more than 366 days before it (367 in a
 * zone other than UTC); null if none.
 * Local days are scanned backwards; on a day with a change of offset each wall time is mapped on its
 * own (wallToInstant), which never decreases, so the first one found is the latest.
 */
export function previousFireTime(schedule: CronSchedule, atMs: number): number | null {
  assertFinite(atMs, 'atMs');
  const lowest = atMs - SEARCH_DAYS * DAY_MS - zoneSlackMs(schedule);
  // The local day of atMs is within a day of its UTC day (offsets are -12…+14 h).
  const startDay = floorDay(atMs) + 2 * DAY_MS;
  for (let i = 0; i <= SEARCH_DAYS + 5; i++) {
    const dayWall = startDay - i * DAY_MS;
    if (dayWall + DAY_MS + 15 * HOUR_MS < lowest) return null;
    if (!dayMatches(schedule, dayWall)) continue;
    const zone = zoneDay(schedule.timezone, dayWall);
    // Every wall time w of the day fires at or after w - (the larger offset).
    let to = Math.min(
      DAY_SECONDS - 1,
      Math.floor((atMs + Math.max(zone.before, zone.after) - dayWall) / SECOND_MS),
    );
    for (let s = latestInDay(schedule, to); s !== null; s = latestInDay(schedule, to)) {
      const at = wallToInstant(zone, dayWall + s * SECOND_MS);
      if (at <= atMs) return at >= lowest ? at : null;
      to = s - 1;
    }
  }
  return null;
}

/**
 * Earliest fire time (whole second) > afterMs, no more than 366 days after it, or five years for a
 * schedule that can fire on 29 February (any other schedule that ever fires does so within a year).
 */
export function nextFireTime(schedule: CronSchedule, afterMs: number): number | null {
  assertFinite(afterMs, 'afterMs');
  const horizonDays = canFireOnLeapDay(schedule) ? LEAP_DAY_SEARCH_DAYS : SEARCH_DAYS;
  const highest = afterMs + horizonDays * DAY_MS + zoneSlackMs(schedule);
  const startDay = floorDay(afterMs) - 2 * DAY_MS;
  for (let i = 0; i <= horizonDays + 5; i++) {
    const dayWall = startDay + i * DAY_MS;
    if (dayWall - 15 * HOUR_MS > highest) return null;
    if (!dayMatches(schedule, dayWall)) continue;
    const zone = zoneDay(schedule.timezone, dayWall);
    // Every wall time w of the day fires at or before w - (the smaller offset).
    let from = Math.max(
      0,
      Math.floor((afterMs + Math.min(zone.before, zone.after) - dayWall) / SECOND_MS) + 1,
    );
    for (let s = earliestInDay(schedule, from); s !== null; s = earliestInDay(schedule, from)) {
      const at = wallToInstant(zone, dayWall + s * SECOND_MS);
      if (at > afterMs) return at <= highest ? at : null;
      from = s + 1;
    }
  }
  return null;
}

function canFireOnLeapDay(schedule: CronSchedule): boolean {
  return schedule.months.includes(2) && schedule.daysOfMonth.includes(29);
}

/** First second-of-day >= from the schedule fires at; whole hours and minutes are skipped. */
function earliestInDay(schedule: CronSchedule, from: number): number | null {
  if (from >= DAY_SECONDS) return null;
  const fromHour = Math.floor(from / 3600);
  const fromMinute = Math.floor(from / 60) % 60;
  for (const hour of schedule.hours) {
    if (hour < fromHour) continue;
    for (const minute of schedule.minutes) {
      if (hour === fromHour && minute < fromMinute) continue;
      const floor = hour === fromHour && minute === fromMinute ? from % 60 : 0;
      const second = schedule.seconds.find((x) => x >= floor);
      if (second !== undefined) return hour * 3600 + minute * 60 + second;
    }
  }
  return null;
}

/** Last second-of-day <= to the schedule fires at; whole hours and minutes are skipped. */
function latestInDay(schedule: CronSchedule, to: number): number | null {
  if (to < 0) return null;
  const toHour = Math.floor(to / 3600);
  const toMinute = Math.floor(to / 60) % 60;
  for (let h = schedule.hours.length - 1; h >= 0; h--) {
    const hour = schedule.hours[h]!;
    if (hour > toHour) continue;
    for (let m = schedule.minutes.length - 1; m >= 0; m--) {
      const minute = schedule.minutes[m]!;
      if (hour === toHour && minute > toMinute) continue;
      const ceiling = hour === toHour && minute === toMinute ? to % 60 : 59;
      const second = schedule.seconds.findLast((x) => x <= ceiling);
      if (second !== undefined) return hour * 3600 + minute * 60 + second;
    }
  }
  return null;
}
