import { chmodSync, copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

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

/**
 * A service's `Environment=` lines as the process gets them: `%i` is the instance name and `%d` the
 * credentials folder (`$CREDENTIALS_DIRECTORY`, where `LoadCredential=` puts its copies).
 */
export function unitEnvironment(
  service: Record<string, string[]>,
  specifiers: { i: string; d: string },
): Record<string, string> {
  return Object.fromEntries(
    (service.Environment ?? []).map((line) => {
      const eq = line.indexOf('=');
      const value = line.slice(eq + 1).replace(/%([id])/g, (_, s: 'i' | 'd') => specifiers[s]);
      return [line.slice(0, eq), value];
    }),
  );
}

/** `LoadCredential=<name>:<source>` lines, `%i` substituted: name → source file. */
export function unitCredentials(service: Record<string, string[]>, instance: string): Record<string, string> {
  return Object.fromEntries(
    (service.LoadCredential ?? []).map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon), line.slice(colon + 1).replace(/%i/g, instance)];
    }),
  );
}

/**
 * What systemd does when it starts instance `instance` of the unit, replayed on stand-in folders
 * (`onMachine` maps a path of the unit to its stand-in): the StateDirectory made with
 * StateDirectoryMode, each `LoadCredential=` source copied into `credentials` (`%d`, made 0700), and
 * the `Environment=` lines with `%i` and `%d` filled in, their paths mapped.
 */
export function replayUnitStart(
  service: Record<string, string[]>,
  instance: string,
  options: { credentials: string; onMachine: (path: string) => string },
): { env: Record<string, string>; state: string } {
  const { credentials, onMachine } = options;
  const state = onMachine(`/var/lib/${service.StateDirectory![0]!.replace(/%i/g, instance)}`);
  mkdirSync(state, { recursive: true });
  chmodSync(state, Number.parseInt(service.StateDirectoryMode![0]!, 8));
  mkdirSync(credentials, { mode: 0o700 });
  for (const [name, source] of Object.entries(unitCredentials(service, instance)))
    copyFileSync(onMachine(source), join(credentials, name));
  const env = Object.fromEntries(
    Object.entries(unitEnvironment(service, { i: instance, d: credentials })).map(([name, value]) => [
      name,
      onMachine(value),
    ]),
  );
  return { env, state };
}
