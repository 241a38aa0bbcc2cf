import { ValidationError } from './errors';
import { ENV_VAR_LIMITS, NewEnvVar, parseEnvVarName, parseEnvVarRemark, parseEnvVarValue } from './env-vars';

/**
 * Bulk import of env vars (issue 31 item 2, ADR 0061) from an `export A="…"` shell file or QingLong's
 * env JSON export (`[{name, value, remarks, status}]`, status 0 enabled, 1 disabled). Rows of one name
 * are joined by `&` in file order, as QingLong hands them to a script; disabled rows join only when
 * no row of the name is enabled (the variable is then imported disabled). Every variable is imported
 * secret unless named in `plain`. What cannot be read is reported by line or item, never imported.
 */
export interface EnvImportSkip {
  readonly at: string;
  readonly reason: string;
}

export interface EnvImportSource {
  readonly entries: NewEnvVar[];
  readonly skipped: EnvImportSkip[];
}

/** The most characters of one import file (inside the admin listener's 128 KiB body). */
export const ENV_IMPORT_MAX_BYTES = 96 * 1024;

interface Row {
  readonly name: string;
  readonly value: string;
  readonly remark: string;
  readonly enabled: boolean;
}

export function parseEnvImport(text: string, plain: readonly string[] = []): EnvImportSource {
  const skipped: EnvImportSkip[] = [];
  const rows = text.trimStart().startsWith('[') ? jsonRows(text, skipped) : shellRows(text, skipped);
  const byName = new Map<string, Row[]>();
  for (const row of rows) byName.set(row.name, [...(byName.get(row.name) ?? []), row]);
  const entries: NewEnvVar[] = [];
  for (const [name, all] of byName) {
    const enabled = all.filter((r) => r.enabled);
    const used = enabled.length > 0 ? enabled : all;
    const secret = !plain.includes(name);
    try {
      entries.push({
        name,
        value: parseEnvVarValue(used.map((r) => r.value).join('&'), secret),
        secret,
        remark: all.find((r) => r.remark !== '')?.remark ?? '',
        enabled: enabled.length > 0,
      });
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      skipped.push({ at: name, reason: error.message });
    }
  }
  if (entries.length > ENV_VAR_LIMITS.total) throw new ValidationError('content', 'too_many_items');
  return { entries, skipped };
}

function row(name: unknown, value: unknown, remark: unknown, enabled: boolean): Row {
  return {
    name: parseEnvVarName(name),
    value: typeof value === 'string' ? value : String(value ?? ''),
    remark: remark === undefined || remark === null ? '' : parseEnvVarRemark(String(remark).trim()),
    enabled,
  };
}

function jsonRows(text: string, skipped: EnvImportSkip[]): Row[] {
  let items: unknown;
  try {
    items = JSON.parse(text);
  } catch {
    throw new ValidationError('content', 'invalid_json');
  }
  if (!Array.isArray(items)) throw new ValidationError('content', 'must_be_array');
  const rows: Row[] = [];
  items.forEach((item, i) => {
    try {
      if (item === null || typeof item !== 'object' || Array.isArray(item))
        throw new ValidationError(`[${i}]`, 'must_be_object');
      const r = item as Record<string, unknown>;
      rows.push(row(r.name, r.value, r.remarks, r.status === undefined || r.status === 0));
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      skipped.push({ at: `item ${i + 1}`, reason: error.message });
    }
  });
  return rows;
}

const EXPORT = /^export[ \t]+([^=\s]+)=/;

/**
 * `export NAME="value"` (`\"`, `\\`, `\$`, `` \` `` unescaped; a value may span lines),
 * `export NAME='value'` (literal), `export NAME=value` (to the line's end, a trailing comment cut).
 * Blank lines and `#` comments are passed over; any other line is reported.
 */
function shellRows(text: string, skipped: EnvImportSkip[]): Row[] {
  const rows: Row[] = [];
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const at = `line ${i + 1}`;
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = EXPORT.exec(line);
    if (!m) {
      skipped.push({ at, reason: 'not an export line' });
      continue;
    }
    let rest = line.slice(m[0].length);
    let value = '';
    const quote = rest[0];
    if (quote === '"' || quote === "'") {
      rest = rest.slice(1);
      let closed = false;
      for (;;) {
        for (let j = 0; j < rest.length; j++) {
          const c = rest[j]!;
          if (quote === '"' && c === '\\' && j + 1 < rest.length && '"\\$`'.includes(rest[j + 1]!)) {
            value += rest[++j];
          } else if (c === quote) {
            closed = true;
            break;
          } else value += c;
        }
        if (closed || i + 1 >= lines.length) break;
        value += '\n';
        rest = lines[++i]!;
      }
      if (!closed) {
        skipped.push({ at, reason: 'unterminated quote' });
        continue;
      }
    } else value = rest.replace(/[ \t]+#.*$/, '');
    try {
      rows.push(row(m[1], value, undefined, true));
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      skipped.push({ at, reason: error.message });
    }
  }
  return rows;
}
