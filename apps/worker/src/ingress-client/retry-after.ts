/**
 * RFC 9110 `Retry-After` as milliseconds from `nowMs`: delay-seconds (`120`) or an HTTP-date; absent,
 * malformed or already past is undefined (the caller keeps its own delay). Capping it is the caller's.
 */
export function parseRetryAfter(
  value: string | string[] | undefined,
  nowMs = Date.now(),
): number | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  if (/^\d{1,9}$/.test(text)) return Number(text) * 1000;
  // An HTTP-date names a weekday first; Date.parse would take many other shapes too.
  if (!/^[A-Z][a-z]{2}, /.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isFinite(at) && at > nowMs ? at - nowMs : undefined;
}
