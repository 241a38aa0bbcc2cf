/**
 * Settings from environment variables (R-OPS-3), shared by the control plane and the worker: every
 * setting has one variable, a default and a line of documentation, and is validated at start.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export type Parser<T> = (raw: string, name: string) => T;

export interface Setting<C, K extends keyof C = keyof C> {
  readonly key: K;
  readonly env: string;
  /** A literal, or derived from the settings listed before this one. */
  readonly default: string | ((partial: Partial<C>) => string);
  readonly doc: string;
  readonly parse: Parser<C[K]>;
}

export const oneOf =
  <T extends string>(values: readonly T[]): Parser<T> =>
  (raw, name) => {
    if (!(values as readonly string[]).includes(raw)) {
      throw new ConfigError(`${name}=${raw} is not one of ${values.join(', ')}`);
    }
    return raw as T;
  };

export const int =
  (min: number, max: number): Parser<number> =>
  (raw, name) => {
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new ConfigError(`${name}=${raw} must be an integer in ${min}..${max}`);
    }
    return n;
  };

export const bool: Parser<boolean> = (raw, name) => {
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name}=${raw} must be true or false`);
};

export const nonEmpty: Parser<string> = (raw, name) => {
  if (!raw.trim()) throw new ConfigError(`${name} must not be empty`);
  return raw;
};

/**
 * Reads every setting in order (a derived default sees the ones before it). Variables that start
 * with `prefix`, are not known and do not match `ignore` are refused: a typo fails at start.
 */
export function readSettings<C>(
  settings: readonly Setting<C>[],
  env: NodeJS.ProcessEnv,
  unknownCheck: { prefix: string; ignore?: RegExp; what?: string },
): C {
  const known = new Set(settings.map((s) => s.env));
  const unknown = Object.keys(env).filter(
    (k) => k.startsWith(unknownCheck.prefix) && !known.has(k) && !unknownCheck.ignore?.test(k),
  );
  if (unknown.length)
    throw new ConfigError(`unknown ${unknownCheck.what ?? 'setting'}(s): ${unknown.join(', ')}`);
  const config: Partial<C> = {};
  for (const setting of settings) {
    const fallback = typeof setting.default === 'function' ? setting.default(config) : setting.default;
    config[setting.key] = setting.parse(env[setting.env] ?? fallback, setting.env);
  }
  return config as C;
}

/** The README table of a settings list; derived defaults are shown for `sample` and starred. */
export function settingsTable<C>(
  settings: readonly Setting<C>[],
  sample: Partial<C>,
  footnote: string,
): string {
  const rows = settings.map((s) => {
    const value = typeof s.default === 'function' ? s.default(sample) : s.default;
    const shown = value === '' ? '(empty)' : `\`${value}\``;
    return `| \`${s.env}\` | ${shown}${typeof s.default === 'function' ? '*' : ''} | ${s.doc} |`;
  });
  return ['| variable | default | meaning |', '|---|---|---|', ...rows, '', `\\* ${footnote}`].join('\n');
}

/**
 * Control-plane settings about the certificates it issues to workers (ADR 0045 §5). They carry the
 * `QL_WORKER_` prefix the worker owns, so the worker ignores exactly these names (the quickstart and
 * Compose hand one environment to both); any other unknown `QL_WORKER_` name is still refused there.
 */
export const CONTROL_PLANE_WORKER_SETTINGS =
  /^QL_WORKER_(ISSUER_CERT|ISSUER_KEY|ISSUER_KEY_PEM|CERT_TTL_MS)$/;
