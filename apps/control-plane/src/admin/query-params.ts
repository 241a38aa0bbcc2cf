import { ValidationError, outOfRange, readInt, readObject, readString } from '@ql/domain';

/** The most items one admin list page holds. */
export const MAX_PAGE = 200;
export const DEFAULT_PAGE = 50;

/**
 * Plain decimal digits and nothing else: no sign, space, point, exponent, `0x`, or leading zero (each
 * number has one spelling, the one our cursors print). 15 digits at most keeps every value a safe
 * integer; longer is out of range for every parameter we have.
 */
const DECIMAL = /^(?:0|[1-9][0-9]*)$/;
const MAX_DIGITS = 15;

/** The one reader of an integer from a query string or path segment, never `Number()` (it takes `0x10`, `1e2`, ` 5`). */
export function readQueryInt(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'string' || !DECIMAL.test(value))
    throw new ValidationError(field, 'must_be_decimal_digits');
  if (value.length > MAX_DIGITS) throw outOfRange(field, min, max);
  return readInt(Number(value), field, min, max);
}

/** `?limit=` of every admin list: 1..MAX_PAGE, default 50. */
export function readLimit(value: unknown): number {
  return value === undefined ? DEFAULT_PAGE : readQueryInt(value, 'limit', 1, MAX_PAGE);
}

/**
 * A list keyed by name (`?after=<name>&limit=`): the query read strictly, one page fetched, each item
 * viewed, and `nextAfter` the last item's name when the page is full.
 */
export async function namePage<T extends { readonly name: string }, V>(
  query: unknown,
  name: { readonly max: number; readonly pattern: RegExp },
  fetch: (page: { after?: string; limit: number }) => Promise<T[]>,
  view: (item: T) => V,
): Promise<{ items: V[]; nextAfter: string | null }> {
  const q = readObject(query ?? {}, 'query', ['after', 'limit']);
  const after = q.after === undefined ? undefined : readString(q.after, 'after', name);
  const limit = readLimit(q.limit);
  const items = await fetch({ after, limit });
  return {
    items: items.map(view),
    nextAfter: items.length === limit ? items[items.length - 1]!.name : null,
  };
}
