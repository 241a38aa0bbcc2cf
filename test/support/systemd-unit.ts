/** `[Section]` → key → values of a systemd unit file (a key may repeat, as Environment= does). */
export function parseUnit(unit: string): Record<string, Record<string, string[]>> {
  const sections: Record<string, Record<string, string[]>> = {};
  let current: Record<string, string[]> | undefined;
  for (const raw of unit.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const section = /^\[(\w+)\]$/.exec(line);
    if (section) {
      current = sections[section[1]!] = {};
      continue;
    }
    const eq = line.indexOf('=');
    if (!current || eq <= 0) throw new Error(`unit file: cannot read "${line}"`);
    (current[line.slice(0, eq)] ??= []).push(line.slice(eq + 1));
  }
  return sections;
}
