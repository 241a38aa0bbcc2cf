import { ValidationError } from './errors';

/** The default zone of a cron schedule, and the one a task spec leaves out of its canonical form. */
export const DEFAULT_CRON_TIMEZONE = 'UTC';
export const TIMEZONE_MAX_LENGTH = 64;
/** IANA names (`Area/Location`, `Etc/GMT-8`, `UTC`); no numeric offsets such as `+08:00`. */
export const TIMEZONE_PATTERN = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+){0,2}$/;

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      era: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    if (formatters.size > 1_000) formatters.clear();
    formatters.set(zone, f);
  }
  return f;
}

/**
 * A time zone as a task spec holds it: an IANA name this runtime's Intl knows (case-insensitive),
 * kept as written; `UTC` in any case is the default.
 */
export function parseTimezone(value: unknown, field = 'timezone'): string {
  if (typeof value !== 'string' || value.length > TIMEZONE_MAX_LENGTH || !TIMEZONE_PATTERN.test(value)) {
    throw new ValidationError(
      field,
      'invalid_timezone',
      `${field}: invalid_timezone: expected an IANA time zone name such as Asia/Shanghai or UTC`,
    );
  }
  if (value.toUpperCase() === DEFAULT_CRON_TIMEZONE) return DEFAULT_CRON_TIMEZONE;
  try {
    formatter(value);
  } catch {
    throw new ValidationError(
      field,
      'invalid_timezone',
      `${field}: invalid_timezone: unknown time zone "${value}"`,
    );
  }
  return value;
}

/** The zone's offset from UTC at instant `at` (ms, whole seconds): local wall time = at + offset. */
export function zoneOffsetMs(zone: string, at: number): number {
  if (zone === DEFAULT_CRON_TIMEZONE) return 0;
  const second = Math.floor(at / 1000) * 1000;
  const parts: Record<string, string> = {};
  for (const p of formatter(zone).formatToParts(second)) parts[p.type] = p.value;
  const year = Number(parts.year) * (parts.era === 'BC' || parts.era === 'B' ? -1 : 1);
  const wall = Date.UTC(
    year,
    Number(parts.month) - 1,
    Number(parts.day),
    Number(parts.hour),
    Number(parts.minute),
    Number(parts.second),
  );
  return wall - second;
}

/**
 * How one local day's wall times map to instants. `before` is the offset at the day's start, `after`
 * at its end, `transition` the first instant with `after` (only meaningful when they differ).
 */
export interface ZoneDay {
  readonly before: number;
  readonly after: number;
  readonly transition: number;
}

/**
 * The offsets around the local day starting at wall time `dayWall` (ms, as if UTC). Every instant of
 * the day lies within 15 h before its wall start and 13 h after its wall end (offsets are -12…+14 h);
 * one change of offset in that window is found to the second by bisection.
 */
export function zoneDay(zone: string, dayWall: number): ZoneDay {
  if (zone === DEFAULT_CRON_TIMEZONE) return UTC_DAY;
  const key = `${zone} ${dayWall}`;
  let day = zoneDays.get(key);
  if (!day) {
    day = findZoneDay(zone, dayWall);
    // A zone's rules do not change while the process runs: a bounded cache of days is always right.
    if (zoneDays.size >= 10_000) zoneDays.clear();
    zoneDays.set(key, day);
  }
  return day;
}

const UTC_DAY: ZoneDay = { before: 0, after: 0, transition: 0 };
const zoneDays = new Map<string, ZoneDay>();

function findZoneDay(zone: string, dayWall: number): ZoneDay {
  let lo = dayWall - 15 * HOUR_MS;
  let hi = dayWall + DAY_MS + 13 * HOUR_MS;
  const before = zoneOffsetMs(zone, lo);
  const after = zoneOffsetMs(zone, hi);
  if (before === after) return { before, after, transition: hi };
  while (hi - lo > 1000) {
    const mid = Math.floor((lo + hi) / 2000) * 1000;
    if (zoneOffsetMs(zone, mid) === before) lo = mid;
    else hi = mid;
  }
  return { before, after, transition: hi };
}

/**
 * The instant a wall time (ms, as if UTC) fires at. A wall time the clock shows twice (the offset
 * falls back) fires once, at its first occurrence; one the clock skips (the offset springs forward)
 * fires at the instant of the jump, as the first time the clock shows after it. Never decreasing in
 * the wall time, so the first matching wall time after a point is also the first instant.
 */
export function wallToInstant(day: ZoneDay, wall: number): number {
  if (day.before === day.after) return wall - day.before;
  const early = wall - day.before;
  const late = wall - day.after;
  const earlyValid = early < day.transition;
  const lateValid = late >= day.transition;
  if (earlyValid && lateValid) return Math.min(early, late);
  if (earlyValid) return early;
  if (lateValid) return late;
  return day.transition;
}
