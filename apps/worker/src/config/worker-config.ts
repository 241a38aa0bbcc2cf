// Size: the worker's one table of settings (env name, default, doc, parser) and their cross-checks: one place to read them all
import { readFileSync, statSync } from 'node:fs';
import { CAPABILITY_LIMITS, LABEL_KEY_PATTERN, MAX_CONCURRENT_RUNS, isWorkerId } from '@ql/domain';
import {
  ConfigError,
  Parser,
  Setting,
  int,
  nonEmpty,
  oneOf,
  readSettings,
  CONTROL_PLANE_WORKER_SETTINGS,
  settingsTable,
} from '@ql/contracts';
import type { CgroupSetting } from '../host/cgroup';
import { JOURNAL_LIMITS } from '../journal/journal-states';
import { MACHINE_CLASSES, MachineClass } from '../node-flags';

/**
 * The headless worker's settings: one environment variable each, validated once at start, with a
 * default and a line of documentation (R-OPS-3). `workerConfigTable()` renders the README table.
 */
export interface WorkerConfig {
  readonly workerId: string;
  /** The control-plane replicas, tried in this order first; the client sticks to the last that worked. */
  readonly controlPlaneOrigins: readonly string[];
  readonly tlsCaPath: string;
  readonly tlsCertPath: string;
  readonly tlsKeyPath: string;
  /**
   * ADR 0045 §2: the token to enroll with when there is no usable certificate; never logged or written.
   * From `QL_WORKER_ENROLL_TOKEN`, or read from the file `QL_WORKER_ENROLL_TOKEN_FILE` names.
   */
  readonly enrollToken: string;
  /** The file the token was read from ('' when none): kept out of the environment (/proc/<pid>/environ). */
  readonly enrollTokenFile: string;
  /** ADR 0045 §3: renew when this share (%) of the certificate's remaining life, as received, has passed. */
  readonly certRenewAtPercent: number;
  readonly maxConcurrentRuns: number;
  /** ADR 0060: the highest protocol version the worker registers with (3: wire v1, 4: wire v2). */
  readonly protocolMax: number;
  readonly heartbeatMs: number;
  readonly pullIntervalMs: number;
  readonly pullWaitMs: number;
  readonly requestTimeoutMs: number;
  readonly stopBudgetMs: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly journalDir: string;
  readonly journalMaxRecords: number;
  readonly workDir: string;
  readonly keepFailedRuns: number;
  readonly keepFailedBytes: number;
  readonly bundleCacheDir: string;
  readonly bundleCacheMb: number;
  readonly killGraceMs: number;
  readonly reaperLingerMs: number;
  readonly cgroup: CgroupSetting;
  readonly outputMaxBytes: number;
  /** How long a chunk of output may wait to ride on the completion before it goes as a `logs` call (ADR 0044). */
  readonly logLingerMs: number;
  /** How long after a spawn the `running` report waits for the process to end (ADR 0047); 0: it goes at once. */
  readonly runningReportDelayMs: number;
  /** The user tasks run as (resolved and checked at start: executor/run-as.ts); null: the worker's own. */
  readonly runAs: RunAsSpec | null;
  readonly logLevel: WorkerLogLevel;
  /** Read by bin/ql-worker, which picks node's V8 flags from it (ADR 0046); validated here too. */
  readonly machineClass: MachineClass | 'auto';
}

/** `QL_WORKER_RUN_AS` as written: a user name (looked up in /etc/passwd at start) or numeric ids. */
export type RunAsSpec = { readonly user: string } | { readonly uid: number; readonly gid: number };

export const WORKER_LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type WorkerLogLevel = (typeof WORKER_LOG_LEVELS)[number];

/** Configuration errors of the worker are the shared ConfigError. */
export const WorkerConfigError = ConfigError;
export type WorkerConfigError = ConfigError;

const path = nonEmpty;

const workerId: Parser<string> = (raw, name) => {
  if (!isWorkerId(raw)) throw new WorkerConfigError(`${name}=${raw} must match ^[a-z0-9][a-z0-9-]{0,62}$`);
  return raw;
};

const logLevel = oneOf(WORKER_LOG_LEVELS);

/** Empty, or `qlet_` and 43 base64url characters; never echoed in an error (it is a secret). */
const enrollToken: Parser<string> = (raw, name) => {
  const text = raw.trim();
  if (text && !/^qlet_[A-Za-z0-9_-]{43}$/.test(text))
    throw new WorkerConfigError(
      `${name} is not an enrollment token (qlet_ and 43 characters); its value is not shown`,
    );
  return text;
};

/** Empty, or a path (surrounding blanks dropped). */
const optionalPath: Parser<string> = (raw) => raw.trim();

/** A token file holds one token and a line break: anything much larger is not one (never read whole). */
const TOKEN_FILE_MAX_BYTES = 1024;

/**
 * `QL_WORKER_ENROLL_TOKEN_FILE`: the token is read from that file (surrounding blanks and the line
 * break dropped) and checked like `QL_WORKER_ENROLL_TOKEN`, which must then be unset or empty. An
 * unreadable file is a configuration error (exit 2), also when the worker holds a usable certificate
 * and would not enroll: a wrong path fails at the first start, not at the first re-enrollment.
 */
function withTokenFile(config: WorkerConfig): WorkerConfig {
  const file = config.enrollTokenFile;
  if (!file) return config;
  const name = 'QL_WORKER_ENROLL_TOKEN_FILE';
  if (config.enrollToken) throw new WorkerConfigError(`set QL_WORKER_ENROLL_TOKEN or ${name}, not both`);
  let text: string;
  try {
    const stat = statSync(file);
    if (!stat.isFile()) throw new WorkerConfigError(`${name}=${file} is not a file`);
    const size = stat.size;
    if (size > TOKEN_FILE_MAX_BYTES)
      throw new WorkerConfigError(
        `${name}=${file} holds ${size} bytes: not an enrollment token (at most ${TOKEN_FILE_MAX_BYTES})`,
      );
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (error instanceof WorkerConfigError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new WorkerConfigError(
      `${name}=${file} cannot be read (${code}): give the file the token was written to`,
    );
  }
  const token = enrollToken(text, `${name} (${file})`);
  if (!token) throw new WorkerConfigError(`${name}=${file} is empty: write the token into it`);
  return { ...config, enrollToken: token };
}

/** `auto`, `off`, or an absolute path without `.`/`..` segments. */
const cgroupSetting: Parser<CgroupSetting> = (raw, name) => {
  if (raw === 'auto' || raw === 'off') return raw;
  if (raw.startsWith('/') && !raw.split('/').some((s) => s === '.' || s === '..'))
    return raw.replace(/(.)\/+$/, '$1') as CgroupSetting;
  throw new WorkerConfigError(`${name}=${raw} must be auto, off or an absolute path (no . or .. segments)`);
};

/** Largest id Linux accepts for a user or group ((uid_t)-1 is "no change"). */
const MAX_ID = 2 ** 32 - 2;

/** Empty: tasks run as the worker's own user. Else `<user>` or `<uid>:<gid>`, never root (0). */
const runAs: Parser<RunAsSpec | null> = (raw, name) => {
  const text = raw.trim();
  if (!text) return null;
  const ids = /^(\d{1,10}):(\d{1,10})$/.exec(text);
  if (ids) {
    const [uid, gid] = [Number(ids[1]), Number(ids[2])];
    if (uid > MAX_ID || gid > MAX_ID)
      throw new WorkerConfigError(`${name}=${text}: ids must be at most ${MAX_ID}`);
    if (uid === 0 || gid === 0) {
      throw new WorkerConfigError(
        `${name}=${text}: tasks must not run as root (uid 0) or in its group (gid 0)`,
      );
    }
    return { uid, gid };
  }
  if (/^\d+$/.test(text)) throw new WorkerConfigError(`${name}=${text}: give numeric ids as <uid>:<gid>`);
  if (!/^[a-z_][a-z0-9_.-]{0,31}$/i.test(text)) {
    throw new WorkerConfigError(`${name}=${text} is neither a user name nor <uid>:<gid>`);
  }
  if (text === 'root') throw new WorkerConfigError(`${name}=root: tasks must not run as root`);
  return { user: text };
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

/** R-WRK-7: at most this many control-plane origins (each gets its own keep-alive socket). */
export const MAX_CONTROL_PLANE_ORIGINS = 8;

/** A comma-separated list of distinct origins (the replicas of one control plane), 1..8 of them. */
const origins: Parser<readonly string[]> = (raw, name) => {
  const items = raw.split(',').map((item) => item.trim());
  if (items.length > MAX_CONTROL_PLANE_ORIGINS) {
    throw new WorkerConfigError(`${name} has ${items.length} origins; at most ${MAX_CONTROL_PLANE_ORIGINS}`);
  }
  const result: string[] = [];
  for (const [i, item] of items.entries()) {
    if (!item) throw new WorkerConfigError(`${name}: item ${i + 1} is empty`);
    const parsed = origin(item, name);
    if (result.includes(parsed)) throw new WorkerConfigError(`${name}: ${parsed} appears twice`);
    result.push(parsed);
  }
  return result;
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

const perWorker = (folder: string) => (c: Partial<WorkerConfig>) =>
  `./var/worker/${c.workerId ?? 'worker-1'}/${folder}`;

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
    key: 'controlPlaneOrigins',
    env: 'QL_WORKER_CONTROL_PLANE_URL',
    default: 'https://127.0.0.1:8443',
    doc: `origin of the control plane worker ingress (TLS 1.3, mTLS), or a comma-separated list of up to ${MAX_CONTROL_PLANE_ORIGINS} replica origins: on a transport failure the worker moves to the next one and keeps its session; no SNI is sent for an IP address`,
    parse: origins,
  },
  {
    key: 'tlsCaPath',
    env: 'QL_WORKER_TLS_CA',
    default: './var/pki/ca.crt',
    doc: 'PEM of the CA the ingress server certificate must chain to; checked at most once a second before a call, read again when it changed',
    parse: path,
  },
  {
    key: 'tlsCertPath',
    env: 'QL_WORKER_TLS_CERT',
    default: pki((id) => `workers/${id}.crt`),
    doc: "PEM of this worker's client certificate; checked at most once a second before a call, read again when it changed (rotation needs no restart)",
    parse: path,
  },
  {
    key: 'tlsKeyPath',
    env: 'QL_WORKER_TLS_KEY',
    default: pki((id) => `workers/${id}.key`),
    doc: "PEM of this worker's private key; checked at most once a second before a call, read again when it changed",
    parse: path,
  },
  {
    key: 'enrollToken',
    env: 'QL_WORKER_ENROLL_TOKEN',
    default: '',
    doc: 'enrollment token (`qlet_…`, from `npm run enroll-token -- create --worker <id>`): when the files of QL_WORKER_TLS_CERT/QL_WORKER_TLS_KEY hold no usable certificate (none, unreadable, not of the key, expired), the worker makes its own key (EC P-256, 0600), sends a CSR with the token to the control plane over server-authenticated TLS (QL_WORKER_TLS_CA) and writes the certificate it gets there; with a usable certificate it is ignored. Set it or QL_WORKER_ENROLL_TOKEN_FILE, not both. Never logged or written to disk; the CA it trusts is QL_WORKER_TLS_CA (`QL_WORKER_CA` is not a setting: refused as unknown)',
    parse: enrollToken,
  },
  {
    key: 'enrollTokenFile',
    env: 'QL_WORKER_ENROLL_TOKEN_FILE',
    default: '',
    doc: 'a file holding the enrollment token instead (one line; a Kubernetes Secret, a systemd credential, a Compose volume): the token stays out of the environment, which `/proc/<pid>/environ` shows to the same user and to root. Read at every start, used as QL_WORKER_ENROLL_TOKEN is (only without a usable certificate: a token is single-use, so after the first start the file may stay, it is not used again while the certificate is valid or renewed). A file that cannot be read, is empty or holds no token is a configuration error (exit 2)',
    parse: optionalPath,
  },
  {
    key: 'certRenewAtPercent',
    env: 'QL_WORKER_CERT_RENEW_AT_PERCENT',
    default: '67',
    doc: 'a certificate issued by the control plane is renewed (new key, over mTLS, no restart) once this share (1..90 %) of its life, counted from when the worker received it, has passed; also at every start before register. A failed renewal is sent again with backoff until the certificate expires (then exit 6)',
    parse: int(1, 90),
  },
  {
    key: 'maxConcurrentRuns',
    env: 'QL_WORKER_MAX_CONCURRENT_RUNS',
    default: '1',
    doc: 'runs this worker accepts at once (1..1024), declared at registration',
    parse: int(1, MAX_CONCURRENT_RUNS),
  },
  {
    key: 'protocolMax',
    env: 'QL_WORKER_PROTOCOL_MAX',
    default: '4',
    doc: 'the highest protocol version the worker registers with (3: wire v1, 4: wire v2): it offers this one and, refused (an older control plane), the next lower, down to 3; none served is exit 15. 3 holds a worker to v1, for an operator who must hold a fleet back (ADR 0060)',
    parse: int(3, 4),
  },
  {
    key: 'heartbeatMs',
    env: 'QL_WORKER_HEARTBEAT_MS',
    default: '5000',
    doc: 'pause between the end of one heartbeat and the start of the next; keep well below the session lease',
    parse: int(50, 300_000),
  },
  {
    key: 'pullIntervalMs',
    env: 'QL_WORKER_PULL_INTERVAL_MS',
    default: '1000',
    doc: 'pause before the next pull after an `idle` answer (or a failed pull); after an offer the worker pulls again at once while it has a free slot, and at once when a run ends',
    parse: int(50, 300_000),
  },
  {
    key: 'pullWaitMs',
    env: 'QL_WORKER_PULL_WAIT_MS',
    default: '20000',
    doc: 'long poll: with a free slot the worker keeps one pull outstanding, on a socket of its own, that the control plane may hold this long (0 … 20000) until a run is queued for it; 0 polls every QL_WORKER_PULL_INTERVAL_MS instead',
    parse: int(0, 20_000),
  },
  {
    key: 'requestTimeoutMs',
    env: 'QL_WORKER_REQUEST_TIMEOUT_MS',
    default: '5000',
    doc: 'deadline of one ingress call (connect, send, read), shared by every origin it tries; with several origins each gets an equal share to connect',
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
    key: 'journalDir',
    env: 'QL_WORKER_JOURNAL_DIR',
    default: perWorker('journal'),
    doc: 'folder of the local journal of accepted runs (0700, one 0600 append-only log, locked by one worker process)',
    parse: path,
  },
  {
    key: 'journalMaxRecords',
    env: 'QL_WORKER_JOURNAL_MAX_RECORDS',
    default: String(JOURNAL_LIMITS.defaultRecords),
    doc: `journal records kept (1..${JOURNAL_LIMITS.maxRecords}); finished ones beyond it are pruned oldest first`,
    parse: int(1, JOURNAL_LIMITS.maxRecords),
  },
  {
    key: 'workDir',
    env: 'QL_WORKER_WORK_DIR',
    default: perWorker('runs'),
    doc: 'root of the per-run work folders (0700); a run starts in a fresh one, which is also its HOME. A folder is removed once the journal records its attempt finished, a succeeded one at once; failed ones are kept within QL_WORKER_KEEP_FAILED_RUNS and QL_WORKER_KEEP_FAILED_BYTES',
    parse: path,
  },
  {
    key: 'keepFailedRuns',
    env: 'QL_WORKER_KEEP_FAILED_RUNS',
    default: '5',
    doc: 'work folders of failed, timed-out, cancelled, lost or start-failed attempts kept for debugging (0..1000): the newest; older ones are removed, also by a restarted worker',
    parse: int(0, 1000),
  },
  {
    key: 'keepFailedBytes',
    env: 'QL_WORKER_KEEP_FAILED_BYTES',
    default: '104857600',
    doc: 'bytes the kept failed work folders may hold together (0..1099511627776): the newest are kept while they fit; the first that does not and every older one are removed',
    parse: int(0, 1024 ** 4),
  },
  {
    key: 'bundleCacheDir',
    env: 'QL_WORKER_BUNDLE_CACHE_DIR',
    default: perWorker('bundles'),
    doc: 'folder of unpacked script bundles, one per SHA-256 digest (0700); each attempt runs in its own copy of its bundle, so nothing a run writes reaches the cache; the copy is made ahead, after the last attempt, in `.spare/` here, and renamed into the work folder (keep both on one filesystem, else every attempt copies as it starts) (ADR 0051)',
    parse: path,
  },
  {
    key: 'bundleCacheMb',
    env: 'QL_WORKER_BUNDLE_CACHE_MB',
    default: '256',
    doc: 'MiB the unpacked bundles may hold together (1..1048576); past it the least recently used bundle no running attempt holds is removed. A bundle whose download is larger is refused (the attempt fails to start with `bundle_unavailable`). Spare copies (one per bundle, made ahead of its next attempt) fit in what is left under it and go first',
    parse: int(1, 1024 * 1024),
  },
  {
    key: 'killGraceMs',
    env: 'QL_WORKER_KILL_GRACE_MS',
    default: '5000',
    doc: "pause between SIGTERM and SIGKILL to a run's process group on timeout or cancel",
    parse: int(100, 60_000),
  },
  {
    key: 'reaperLingerMs',
    env: 'QL_WORKER_REAPER_LINGER_MS',
    default: '2000',
    doc: 'how long the reaper `sh` (which kills the run groups if the worker dies) outlives the last run, so the next run reuses it (0..60000); 0 ends it with each last run. An idle worker holds no child once it passed',
    parse: int(0, 60_000),
  },
  {
    key: 'cgroup',
    env: 'QL_WORKER_CGROUP',
    default: 'auto',
    doc: "cgroup v2 containment of runs: `auto` puts each attempt in a cgroup `<own cgroup>/ql-runs/<worker folder>/<attemptId>` (the worker folder: its id and a digest of its journal folder, removed when empty) when the worker's cgroup v2 subtree is writable (systemd `Delegate=yes`, a container), killed as a whole (`cgroup.kill`: `setsid` does not escape) and measured (CPU, peak memory); else one start line says runs are contained by process group only. `off`: process group only. An absolute path: the cgroup v2 folder the worker folder goes in",
    parse: cgroupSetting,
  },
  {
    key: 'outputMaxBytes',
    env: 'QL_WORKER_OUTPUT_MAX_BYTES',
    default: '1048576',
    doc: 'output kept per run (stdout and stderr together); beyond it a truncation marker and nothing more',
    parse: int(4096, 64 * 1024 * 1024),
  },
  {
    key: 'logLingerMs',
    env: 'QL_WORKER_LOG_LINGER_MS',
    default: '200',
    doc: "how long a run's output may wait before it is uploaded (0..60000): what is still waiting when the run ends rides on its completion instead of a `logs` call of its own, up to one logs body; 0 uploads at once. The run log and its tail show output this much later",
    parse: int(0, 60_000),
  },
  {
    key: 'runningReportDelayMs',
    env: 'QL_WORKER_RUNNING_REPORT_DELAY_MS',
    default: '20',
    doc: "how long after a run's spawn its `running` report waits for the process to end (0..5000): a run that ended by then and whose output fits on one completion sends only the completion, which carries the `running` report's handle (one ingress call fewer); 0 reports `running` at once. A longer run is shown `running` this much later",
    parse: int(0, 5000),
  },
  {
    key: 'runAs',
    env: 'QL_WORKER_RUN_AS',
    default: '',
    doc: 'user the tasks run as: a name from /etc/passwd or `<uid>:<gid>`, not root, not the worker\'s own user; the worker (root with only CAP_SETUID, CAP_SETGID, CAP_KILL and CAP_CHOWN) drops to it for each run, so tasks cannot read its key, journal or environment. Checked at start (exit 2 if it cannot switch). Empty: tasks run as the worker\'s own user and can act as the worker (docs/operations.md, "What a task can reach")',
    parse: runAs,
  },
  {
    key: 'logLevel',
    env: 'QL_WORKER_LOG_LEVEL',
    default: 'info',
    doc: '`debug`, `info`, `warn` or `error`',
    parse: logLevel,
  },
  {
    key: 'machineClass',
    env: 'QL_WORKER_MACHINE_CLASS',
    default: 'auto',
    doc: "`small`, `large` or `auto`: the V8 flags `bin/ql-worker` starts node with. `small` (`--lite-mode`: less memory, more CPU per run), `large` (V8's defaults). `auto` is small when the least of the worker's cgroup memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes`, its cgroup's and those above it) and the machine's `MemTotal` is at most 1 GiB, large above it; the launcher logs which and why. Another value: the launcher exits 2 and starts nothing",
    parse: oneOf(['auto', ...MACHINE_CLASSES] as const),
  },
] as const satisfies readonly Setting<WorkerConfig>[];

export function loadWorkerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const result = readSettings<WorkerConfig>(WORKER_SETTINGS as readonly Setting<WorkerConfig>[], env, {
    prefix: 'QL_WORKER_',
    ignore: CONTROL_PLANE_WORKER_SETTINGS,
    what: 'worker setting',
  });
  if (result.requestTimeoutMs >= result.stopBudgetMs) {
    // A single hung call must not be able to eat the whole stop budget before offline is tried.
    throw new WorkerConfigError(
      `QL_WORKER_REQUEST_TIMEOUT_MS (${result.requestTimeoutMs}) must be below QL_WORKER_STOP_BUDGET_MS (${result.stopBudgetMs})`,
    );
  }
  if (result.journalMaxRecords < result.maxConcurrentRuns) {
    // Every run going at once needs its record; a smaller journal could not accept the last ones.
    throw new WorkerConfigError(
      `QL_WORKER_JOURNAL_MAX_RECORDS (${result.journalMaxRecords}) must be at least QL_WORKER_MAX_CONCURRENT_RUNS (${result.maxConcurrentRuns})`,
    );
  }
  return withTokenFile(result);
}

/** The README's worker configuration table. */
export function workerConfigTable(): string {
  return settingsTable(
    WORKER_SETTINGS as readonly Setting<WorkerConfig>[],
    { workerId: '$QL_WORKER_ID' },
    'derived from `QL_WORKER_ID`.',
  );
}
