/** How the console writes times and sizes: relative ages for people, the ISO time on hover. */

export function age(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const seconds = Math.round((now - Date.parse(iso)) / 1000);
  if (seconds < 0) return `in ${span(-seconds)}`;
  return `${span(seconds)} ago`;
}

export function span(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

export function duration(fromIso: string, toIso: string | null): string {
  if (!toIso) return '—';
  const ms = Date.parse(toIso) - Date.parse(fromIso);
  return ms < 1000 ? `${ms} ms` : span(Math.round(ms / 1000));
}

export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '—';
}

/**
 * A certificate's expiry as people read it ("expires in 13h 2m"), and whether it is near: less than
 * 20 % of its life left, or past. Null without a certificate issued by enrollment.
 */
export function expiry(
  issuedAt: string | null | undefined,
  notAfter: string | null | undefined,
  now = Date.now(),
): { text: string; warn: boolean } | null {
  if (!notAfter) return null;
  const end = Date.parse(notAfter);
  const left = end - now;
  const life = issuedAt ? end - Date.parse(issuedAt) : 0;
  const seconds = Math.round(Math.abs(left) / 1000);
  return {
    text: left <= 0 ? `expired ${span(seconds)} ago` : `expires in ${span(seconds)}`,
    warn: left <= 0 || left < 0.2 * life,
  };
}
