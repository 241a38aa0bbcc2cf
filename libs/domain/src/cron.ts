import { ValidationError } from './errors';

/**
 * A parsed five-field cron expression, evaluated in UTC. Every set is sorted ascending and holds no
 * duplicates; day-of-week uses 0..6 with Sunday = 0 (7 in the expression is folded into 0).
 */
export interface CronSchedule {
  readonly expression: string;
  readonly minutes: readonly number[];
  readonly hours: readonly number[];
  readonly daysOfMonth: readonly number[];
  readonly months: readonly number[];
  readonly daysOfWeek: readonly number[];
  /** The field is anything but a bare `*`: with both restricted a day matches when either matches. */
  readonly dayOfMonthRestricted: boolean;
  readonly dayOfWeekRestricted: boolean;
}

export const CRON_MAX_LENGTH = 100;

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
const SEARCH_DAYS = 366;
/** Only a schedule pinned to 29 February can need more than a year (leap days are 4 years apart, 8 around 2100). */
const LEAP_DAY_SEARCH_DAYS = 5 * 366;

const FIELD_BOUNDS = [
  { min: 0, max: 59 }, // minute
  { min: 0, max: 23 }, // hour
  { min: 1, max: 31 }, // day of month
  { min: 1, max: 12 }, // month
  { min: 0, max: 7 }, // day of week, 0 and 7 are Sunday
] as const;

const SHAPE = /^[0-9*,/-]+(?:[ \t]+[0-9*,/-]+){4}$/;
const ITEM = /^(\*|(\d{1,2})(?:-(\d{1,2}))?)(?:\/(\d{1,2}))?$/;

/** Parses `minute hour day-of-month month day-of-week` (numbers only, no names, `?`, `L`, `W` or `#`). */
export function parseCron(expression: unknown, field = 'cron'): CronSchedule {
  if (typeof expression !== 'string' || expression.length > CRON_MAX_LENGTH || !SHAPE.test(expression)) {
    throw new ValidationError(field, 'invalid_cron');
  }
  const parts = expression.split(/[ \t]+/);
  const sets = parts.map((part, i) => parseField(part, FIELD_BOUNDS[i]!.min, FIELD_BOUNDS[i]!.max, field));
  const daysOfWeek = [...new Set(sets[4]!.map((d) => d % 7))].sort((a, b) => a - b);
  return {
    expression,
    minutes: sets[0]!,
    hours: sets[1]!,
    daysOfMonth: sets[2]!,
    months: sets[3]!,
    daysOfWeek,
    dayOfMonthRestricted: parts[2] !== '*',
    dayOfWeekRestricted: parts[4] !== '*',
  };
}

function parseField(text: string, min: number, max: number, field: string): number[] {
  const values = new Set<number>();
  for (const item of text.split(',')) {
    const m = ITEM.exec(item);
    if (!m) throw new ValidationError(field, 'invalid_cron');
    const [, , first, last, stepText] = m;
    let from = min;
    let to = max;
    if (first !== undefined) {
      from = Number(first);
      // `n/s` runs from n to the field's maximum; a bare `n` is the single value.
      to = last !== undefined ? Number(last) : stepText !== undefined ? max : from;
    }
    const step = stepText === undefined ? 1 : Number(stepText);
    if (from < min || to > max || from > to || step < 1 || step > max - min + 1) {
      throw new ValidationError(field, 'invalid_cron');
    }
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return [...values].sort((a, b) => a - b);
}

function dayMatches(schedule: CronSchedule, dayStartMs: number): boolean {
  const date = new Date(dayStartMs);
  if (!schedule.months.includes(date.getUTCMonth() + 1)) return false;
  const dom = schedule.daysOfMonth.includes(date.getUTCDate());
  const dow = schedule.daysOfWeek.includes(date.getUTCDay());
  return schedule.dayOfMonthRestricted && schedule.dayOfWeekRestricted ? dom || dow : dom && dow;
}

function assertFinite(ms: number, name: string): void {
  if (!Number.isFinite(ms)) throw new RangeError(`${name} must be a finite epoch millisecond value`);
}

/** Latest fire time (epoch ms, whole minute) <= atMs and no more than 366 days before it; null if none. */
export function previousFireTime(schedule: CronSchedule, atMs: number): number | null {
  assertFinite(atMs, 'atMs');
  const end = Math.floor(atMs / MINUTE_MS) * MINUTE_MS;
  const lowest = atMs - SEARCH_DAYS * DAY_MS;
  const endDay = Math.floor(end / DAY_MS) * DAY_MS;
  for (let i = 0; i <= SEARCH_DAYS; i++) {
    const day = endDay - i * DAY_MS;
    if (day + DAY_MS <= lowest) return null;
    if (!dayMatches(schedule, day)) continue;
    const lastMinute = i === 0 ? (end - day) / MINUTE_MS : 24 * 60 - 1;
    const fire = latestInDay(schedule, lastMinute);
    if (fire !== null) {
      const at = day + fire * MINUTE_MS;
      return at >= lowest ? at : null;
    }
  }
  return null;
}

/**
 * Earliest fire time (whole minute) > afterMs, no more than 366 days after it, or five years for a
 * schedule that can fire on 29 February (any other schedule that ever fires does so within a year).
 */
export function nextFireTime(schedule: CronSchedule, afterMs: number): number | null {
  assertFinite(afterMs, 'afterMs');
  const start = (Math.floor(afterMs / MINUTE_MS) + 1) * MINUTE_MS;
  const horizonDays = canFireOnLeapDay(schedule) ? LEAP_DAY_SEARCH_DAYS : SEARCH_DAYS;
  const highest = afterMs + horizonDays * DAY_MS;
  const startDay = Math.floor(start / DAY_MS) * DAY_MS;
  for (let i = 0; i <= horizonDays; i++) {
    const day = startDay + i * DAY_MS;
    if (day > highest) return null;
    if (!dayMatches(schedule, day)) continue;
    const firstMinute = i === 0 ? (start - day) / MINUTE_MS : 0;
    const fire = earliestInDay(schedule, firstMinute);
    if (fire !== null) {
      const at = day + fire * MINUTE_MS;
      return at <= highest ? at : null;
    }
  }
  return null;
}

function canFireOnLeapDay(schedule: CronSchedule): boolean {
  return schedule.months.includes(2) && schedule.daysOfMonth.includes(29);
}

/** First minute-of-day >= fromMinute the schedule fires at; whole hours are skipped. */
function earliestInDay(schedule: CronSchedule, fromMinute: number): number | null {
  const fromHour = Math.floor(fromMinute / 60);
  for (const hour of schedule.hours) {
    if (hour < fromHour) continue;
    const floor = hour === fromHour ? fromMinute % 60 : 0;
    const minute = schedule.minutes.find((m) => m >= floor);
    if (minute !== undefined) return hour * 60 + minute;
  }
  return null;
}

/** Last minute-of-day <= toMinute the schedule fires at; whole hours are skipped. */
function latestInDay(schedule: CronSchedule, toMinute: number): number | null {
  const toHour = Math.floor(toMinute / 60);
  for (let h = schedule.hours.length - 1; h >= 0; h--) {
    const hour = schedule.hours[h]!;
    if (hour > toHour) continue;
    const ceiling = hour === toHour ? toMinute % 60 : 59;
    const minute = schedule.minutes.findLast((m) => m <= ceiling);
    if (minute !== undefined) return hour * 60 + minute;
  }
  return null;
}
