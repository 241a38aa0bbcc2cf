import { CAPABILITY_LIMITS, LABEL_KEY_PATTERN, MAX_CONCURRENT_RUNS, isWorkerId } from '@ql/domain';

/**
 * The headless worker's settings: one environment variable each, validated once at start, with a
 * default and a line of documentation (R-OPS-3). `workerConfigTable()` renders the README table.
 */
export interface WorkerConfig {
  readonly workerId: string;
  readonly controlPlaneUrl: string;
  readonly tlsCaPath: string;
  readonly tlsCertPath: string;
  readonly tlsKeyPath: string;
  readonly maxConcurrentRuns: number;
  readonly heartbeatMs: number;
  readonly requestTimeoutMs: number;
  readonly stopBudgetMs: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly logLevel: WorkerLogLevel;
}

export const WORKER_LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type WorkerLogLevel = (typeof WORKER_LOG_LEVELS)[number];

export class WorkerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkerConfigError';
  }
}

type Parser<T> = (raw: string, name: string) => T;

interface Setting<K extends keyof WorkerConfig> {
  readonly key: K;
  readonly env: string;
  readonly default: string | ((partial: Partial<WorkerConfig>) => string);
  readonly doc: string;
  readonly parse: Parser<WorkerConfig[K]>;
}

const int =
  (min: number, max: number): Parser<number> =>
  (raw, name) => {
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new WorkerConfigError(`${name}=${raw} must be an integer in ${min}..${max}`);
    }
    return n;
  };

const path: Parser<string> = (raw, name) => {
  if (!raw.trim()) throw new WorkerConfigError(`${name} must not be empty`);
  return raw;
};

const workerId: Parser<string> = (raw, name) => {
  if (!isWorkerId(raw)) throw new WorkerConfigError(`${name}=${raw} must match ^[a-z0-9][a-z0-9-]{0,62}$`);
  return raw;
};

const logLevel: Parser<WorkerLogLevel> = (raw, name) => {
  if (!(WORKER_LOG_LEVELS as readonly string[]).includes(raw)) {
    throw new WorkerConfigError(`${name}=${raw} is not one of ${WORKER_LOG_LEVELS.join(', ')}`);
  }
  return raw as WorkerLogLevel;
};

/** An `https://host[:port]` origin: no path, query, fragment or user info (the client adds the path). */
const origin: Parser<string> = (raw, name) => {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WorkerConfigError(`${name}=${raw} is not a URL`);
  }
  if (url.protocol !== 'https:') throw new WorkerConfigError(`${name} must be an https:// URL`);
  if (
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    (url.pathname !== '/' && url.pathname !== '')
  ) {
    throw new WorkerConfigError(
      `${name} must be an origin like https://host:8443 (no path, query or user info)`,
    );
  }
  return url.origin;
};

/**
 * `k=v,k=v`. Values are never echoed in errors: labels may carry site names an operator keeps out
 * of logs (R-OPS-2).
 */
const labels: Parser<Record<string, string>> = (raw, name) => {
  const result: Record<string, string> = {};
  if (!raw.trim()) return result;
  const pairs = raw.split(',');
  if (pairs.length > CAPABILITY_LIMITS.labels) {
    throw new WorkerConfigError(`${name} has ${pairs.length} labels; at most ${CAPABILITY_LIMITS.labels}`);
  }
  for (const [i, pair] of pairs.entries()) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new WorkerConfigError(`${name}: item ${i + 1} is not k=v`);
    const key = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    if (key.length > CAPABILITY_LIMITS.labelKeyLength || !LABEL_KEY_PATTERN.test(key)) {
      throw new WorkerConfigError(
        `${name}: label key "${key}" must match ${LABEL_KEY_PATTERN} (≤ ${CAPABILITY_LIMITS.labelKeyLength} chars)`,
      );
    }
    if (Object.hasOwn(result, key)) throw new WorkerConfigError(`${name}: label key "${key}" appears twice`);
    // eslint-disable-next-line no-control-regex
    if (value.length > CAPABILITY_LIMITS.labelValueLength || /[\u0000-\u001f\u007f-\u009f]/.test(value)) {
      throw new WorkerConfigError(
        `${name}: the value of "${key}" must be ≤ ${CAPABILITY_LIMITS.labelValueLength} printable chars`,
      );
    }
    result[key] = value;
  }
  return result;
};

const pki = (file: (id: string) => string) => (c: Partial<WorkerConfig>) =>
  `./var/pki/${file(c.workerId ?? 'worker-1')}`;

/** Order matters where a default depends on an earlier setting. */
export const WORKER_SETTINGS = [
  {
    key: 'workerId',
    env: 'QL_WORKER_ID',
    default: 'worker-1',
    doc: 'worker id; must equal the id in the client certificate (`spiffe://<domain>/worker/<id>`)',
    parse: workerId,
  },
  {
    key: 'controlPlaneUrl',
    env: 'QL_WORKER_CONTROL_PLANE_URL',
    default: 'https://127.0.0.1:8443',
    doc: 'origin of the control plane worker ingress (TLS 1.3, mTLS); no SNI is sent for an IP address',
    parse: origin,
  },
  {
    key: 'tlsCaPath',
    env: 'QL_WORKER_TLS_CA',
    default: './var/pki/ca.crt',
    doc: 'PEM of the CA the ingress server certificate must chain to; re-read on every call',
    parse: path,
  },
  {
    key: 'tlsCertPath',
    env: 'QL_WORKER_TLS_CERT',
    default: pki((id) => `workers/${id}.crt`),
    doc: "PEM of this worker's client certificate; re-read on every call (rotation needs no restart)",
    parse: path,
  },
  {
    key: 'tlsKeyPath',
    env: 'QL_WORKER_TLS_KEY',
    default: pki((id) => `workers/${id}.key`),
    doc: "PEM of this worker's private key; re-read on every call",
    parse: path,
  },
  {
    key: 'maxConcurrentRuns',
    env: 'QL_WORKER_MAX_CONCURRENT_RUNS',
    default: '1',
    doc: 'runs this worker accepts at once (1..1024), declared at registration',
    parse: int(1, MAX_CONCURRENT_RUNS),
  },
  {
    key: 'heartbeatMs',
    env: 'QL_WORKER_HEARTBEAT_MS',
    default: '5000',
    doc: 'pause between the end of one heartbeat and the start of the next; keep well below the session lease',
    parse: int(50, 300_000),
  },
  {
    key: 'requestTimeoutMs',
    env: 'QL_WORKER_REQUEST_TIMEOUT_MS',
    default: '5000',
    doc: 'deadline of one ingress call (connect, send, read)',
    parse: int(100, 120_000),
  },
  {
    key: 'stopBudgetMs',
    env: 'QL_WORKER_STOP_BUDGET_MS',
    default: '10000',
    doc: 'SIGTERM budget for drain, local runs and offline; past it the worker exits non-zero and says so',
    parse: int(100, 600_000),
  },
  {
    key: 'labels',
    env: 'QL_WORKER_LABELS',
    default: '',
    doc: 'placement labels as `k=v,k=v` (≤ 32; values never logged)',
    parse: labels,
  },
  {
    key: 'logLevel',
    env: 'QL_WORKER_LOG_LEVEL',
    default: 'info',
    doc: '`debug`, `info`, `warn` or `error`',
    parse: logLevel,
  },
] as const satisfies readonly Setting<keyof WorkerConfig>[];

export function loadWorkerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const known = new Set<string>(WORKER_SETTINGS.map((s) => s.env));
  const unknown = Object.keys(env).filter((k) => k.startsWith('QL_WORKER_') && !known.has(k));
  if (unknown.length) throw new WorkerConfigError(`unknown worker setting(s): ${unknown.join(', ')}`);
  const config: Record<string, unknown> = {};
  for (const setting of WORKER_SETTINGS) {
    const fallback =
      typeof setting.default === 'function'
        ? setting.default(config as Partial<WorkerConfig>)
        : setting.default;
    config[setting.key] = (setting.parse as Parser<unknown>)(env[setting.env] ?? fallback, setting.env);
  }
  const result = config as unknown as WorkerConfig;
  if (result.requestTimeoutMs >= result.stopBudgetMs) {
    // A single hung call must not be able to eat the whole stop budget before offline is tried.
    throw new WorkerConfigError(
      `QL_WORKER_REQUEST_TIMEOUT_MS (${result.requestTimeoutMs}) must be below QL_WORKER_STOP_BUDGET_MS (${result.stopBudgetMs})`,
    );
  }
  return result;
}

/** The README's worker configuration table. */
export function workerConfigTable(): string {
  const rows = WORKER_SETTINGS.map((s) => {
    const d =
      typeof s.default === 'function'
        ? `\`${s.default({ workerId: '$QL_WORKER_ID' })}\`*`
        : s.default === ''
          ? '(empty)'
          : `\`${s.default}\``;
    return `| \`${s.env}\` | ${d} | ${s.doc} |`;
  });
  return [
    '| variable | default | meaning |',
    '|---|---|---|',
    ...rows,
    '',
    '\\* derived from `QL_WORKER_ID`.',
  ].join('\n');
}
