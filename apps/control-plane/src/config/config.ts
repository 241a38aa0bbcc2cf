// Size: every control-plane setting in one list, each with its default, parser and line of documentation
// (the README table is generated from it); splitting the list would split that one source.
import {
  ConfigError,
  Parser,
  Setting,
  bool,
  int,
  nonEmpty as text,
  oneOf,
  readSettings,
  settingsTable,
} from '@ql/contracts';
import { RUN_LOG_LIMITS } from '@ql/domain';
import { SECRET_KEY_ID_PATTERN } from '@ql/domain';
import { secretCipherOf } from './secret-keys';

export { secretCipherOf };

export { ConfigError };

/**
 * Every setting comes from one environment variable, validated once at start, with a default and a
 * line of documentation (R-OPS-3). `npm run config-docs` prints the README table from this list.
 */
export const PROFILES = ['standalone', 'cluster-control', 'worker'] as const;
export type Profile = (typeof PROFILES)[number];

export interface ControlPlaneConfig {
  readonly profile: Profile;
  readonly databaseUrl: string;
  readonly dbPoolSize: number;
  readonly sqliteBusyRetries: number;
  readonly sqliteCacheMiB: number;
  readonly adminHost: string;
  readonly adminPort: number;
  readonly ingressHost: string;
  readonly ingressPort: number;
  readonly tlsCaPath: string;
  readonly tlsCertPath: string;
  readonly tlsKeyPath: string;
  readonly devPkiDir: string;
  readonly devPki: boolean;
  readonly trustDomain: string;
  readonly workerIssuerCertPath: string;
  readonly workerIssuerKeyPem: string;
  readonly workerIssuerKeyPath: string;
  readonly workerCertTtlMs: number;
  readonly enrollRatePerMinute: number;
  readonly enrollAuditWindowMs: number;
  readonly enrollAuditRows: number;
  readonly secretsKey: string;
  readonly secretsKeyId: string;
  readonly secretsPreviousKeys: string;
  readonly sessionLeaseMs: number;
  /** ADR 0060: the lowest protocol version a worker may register with (3: wire v1, 4: wire v2). */
  readonly protocolMin: number;
  readonly protocolMax: number;
  readonly heartbeatBatchWindowMs: number;
  readonly heartbeatBatchMax: number;
  readonly claimBatchMax: number;
  readonly runLeaseMs: number;
  readonly placementPreferenceHoldMs: number;
  readonly offerWaitMaxMs: number;
  readonly offerRecheckMs: number;
  readonly sweepIntervalMs: number;
  readonly sweepPageSize: number;
  readonly runDeadlineGraceMs: number;
  readonly runLogCapBytes: number;
  readonly bundleMaxBytes: number;
  readonly bundleUploadsMax: number;
  readonly cronTickMs: number;
  readonly revocationCacheMs: number;
  readonly ingressConnectionMaxMs: number;
  readonly ingressHandshakeTimeoutMs: number;
  readonly ingressUncredentialedTimeoutMs: number;
  readonly ingressUncredentialedPerAddress: number;
  readonly ingressUncredentialedMax: number;
  readonly ingressRatePerSecond: number;
  readonly ingressRateBurst: number;
  readonly ingressRatePerSlot: number;
  readonly consoleDir: string;
  readonly consoleSessionIdleMs: number;
  readonly consoleSessionMaxMs: number;
  readonly consoleCookieSecure: 'auto' | 'always' | 'never';
  readonly shutdownGraceMs: number;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
}

const trustDomain: Parser<string> = (raw, name) => {
  if (!/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/.test(raw))
    throw new ConfigError(`${name}=${raw} is not a DNS-like trust domain`);
  return raw;
};
const optional: Parser<string> = (raw) => raw.trim();
const keyId: Parser<string> = (raw, name) => {
  if (!SECRET_KEY_ID_PATTERN.test(raw)) throw new ConfigError(`${name}=${raw} is not 1–32 of A-Za-z0-9._-`);
  return raw;
};
const pki = (file: string) => (c: Partial<ControlPlaneConfig>) => `${c.devPkiDir ?? './var/pki'}/${file}`;

/** Order matters where a default depends on an earlier setting. */
export const SETTINGS = [
  {
    key: 'profile',
    env: 'QL_PROFILE',
    default: 'standalone',
    doc: '`standalone` (SQLite, one replica), `cluster-control` (PostgreSQL, many replicas) or `worker`',
    parse: oneOf(PROFILES),
  },
  {
    key: 'databaseUrl',
    env: 'QL_DATABASE_URL',
    default: 'sqlite:./var/ql.sqlite',
    doc: '`sqlite:<file>` or `postgres://user@host:port/db`; `cluster-control` requires PostgreSQL',
    parse: databaseUrl,
  },
  {
    key: 'dbPoolSize',
    env: 'QL_DB_POOL_SIZE',
    default: '10',
    doc: 'PostgreSQL connections per replica',
    parse: int(1, 200),
  },
  {
    key: 'sqliteBusyRetries',
    env: 'QL_SQLITE_BUSY_RETRIES',
    default: '40',
    doc: 'attempts for a SQLite write that finds the database locked by another process',
    parse: int(1, 1000),
  },
  {
    key: 'sqliteCacheMiB',
    env: 'QL_SQLITE_CACHE_MIB',
    default: '4',
    doc: "bound of the SQLite connection's page cache, MiB (`PRAGMA cache_size`); the driver's default is 15.6 (ADR 0053)",
    parse: int(1, 1024),
  },
  {
    key: 'adminHost',
    env: 'QL_ADMIN_HOST',
    default: '127.0.0.1',
    doc: 'address of the admin API and probe listener (plain HTTP)',
    parse: text,
  },
  {
    key: 'adminPort',
    env: 'QL_ADMIN_PORT',
    default: '8080',
    doc: 'port of the admin API and probes (`/livez`, `/readyz`, `/openapi.json`); 0 picks a free one',
    parse: int(0, 65535),
  },
  {
    key: 'ingressHost',
    env: 'QL_INGRESS_HOST',
    default: '127.0.0.1',
    doc: 'address of the worker ingress listener (TLS 1.3, client certificates required)',
    parse: text,
  },
  {
    key: 'ingressPort',
    env: 'QL_INGRESS_PORT',
    default: '8443',
    doc: 'port of the worker ingress listener; 0 picks a free one',
    parse: int(0, 65535),
  },
  {
    key: 'devPkiDir',
    env: 'QL_DEV_PKI_DIR',
    default: './var/pki',
    doc: 'folder of the development PKI',
    parse: text,
  },
  {
    key: 'devPki',
    env: 'QL_DEV_PKI',
    default: (c) => String(c.profile === 'standalone'),
    doc: 'create the development PKI on first start when the files are missing (default: true for `standalone`)',
    parse: bool,
  },
  {
    key: 'tlsCaPath',
    env: 'QL_TLS_CA',
    default: pki('ca.crt'),
    doc: 'PEM of the worker CA; worker client certificates must chain to it',
    parse: text,
  },
  {
    key: 'tlsCertPath',
    env: 'QL_TLS_CERT',
    default: pki('server.crt'),
    doc: 'PEM certificate of the ingress listener',
    parse: text,
  },
  {
    key: 'tlsKeyPath',
    env: 'QL_TLS_KEY',
    default: pki('server.key'),
    doc: 'PEM private key of the ingress listener',
    parse: text,
  },
  {
    key: 'trustDomain',
    env: 'QL_TRUST_DOMAIN',
    default: 'qinglong.local',
    doc: 'SPIFFE trust domain: worker certificates carry `spiffe://<domain>/worker/<workerId>`',
    parse: trustDomain,
  },
  {
    key: 'workerIssuerCertPath',
    env: 'QL_WORKER_ISSUER_CERT',
    default: (c) => (c.devPki ? pki('worker-issuer.crt')(c) : ''),
    doc: 'PEM of the CA that signs enrolled workers’ certificates (a dedicated intermediate under `QL_TLS_CA` is recommended; more certificates after it are sent as its chain); empty: enrollment and renewal answer 503 `enrollment_disabled`',
    parse: optional,
  },
  {
    key: 'workerIssuerKeyPem',
    env: 'QL_WORKER_ISSUER_KEY_PEM',
    default: '',
    doc: 'the issuer’s private key itself (PKCS#8 PEM), instead of `QL_WORKER_ISSUER_KEY`',
    parse: optional,
  },
  {
    key: 'workerIssuerKeyPath',
    env: 'QL_WORKER_ISSUER_KEY',
    default: (c) => (c.devPki && !c.workerIssuerKeyPem ? pki('worker-issuer.key')(c) : ''),
    doc: 'PEM file of the issuer’s private key (PKCS#8); set it or `QL_WORKER_ISSUER_KEY_PEM`, not both',
    parse: optional,
  },
  {
    key: 'workerCertTtlMs',
    env: 'QL_WORKER_CERT_TTL_MS',
    default: String(24 * 3_600_000),
    doc: 'lifetime of a certificate the control plane issues to a worker (5 min … 30 d); the worker renews it at 2/3 of its life',
    parse: int(300_000, 30 * 24 * 3_600_000),
  },
  {
    key: 'enrollRatePerMinute',
    env: 'QL_ENROLL_RATE_PER_MINUTE',
    default: '30',
    doc: 'enrollment requests one source address may send per minute (`POST /api/v3/worker-ingress/enroll`, the one ingress route served without a client certificate)',
    parse: int(1, 10_000),
  },
  {
    key: 'enrollAuditWindowMs',
    env: 'QL_ENROLL_AUDIT_WINDOW_MS',
    default: '600000',
    doc: 'window of the audit of refused enrollments per source address (1 s … 24 h): past `QL_ENROLL_AUDIT_ROWS` rows in one window, refusals are counted and summed up in one `enrollment.refuse_summary` row when it closes',
    parse: int(1_000, 86_400_000),
  },
  {
    key: 'enrollAuditRows',
    env: 'QL_ENROLL_AUDIT_ROWS',
    default: '1',
    doc: 'refused enrollments from one source address written to the audit log in full per window (1 … 1000); the rest are counted',
    parse: int(1, 1_000),
  },
  {
    key: 'secretsKey',
    env: 'QL_SECRETS_KEY',
    default: '',
    doc: 'the key secrets are encrypted with (AES-256-GCM, ADR 0050): 32 random bytes in base64 (`openssl rand -base64 32`); empty: secrets cannot be stored or delivered, and a start with secrets stored fails',
    parse: optional,
  },
  {
    key: 'secretsKeyId',
    env: 'QL_SECRETS_KEY_ID',
    default: 'primary',
    doc: 'the id stored with each value `QL_SECRETS_KEY` encrypts (1–32 of `A-Za-z0-9._-`); give a new key a new id',
    parse: keyId,
  },
  {
    key: 'secretsPreviousKeys',
    env: 'QL_SECRETS_PREVIOUS_KEYS',
    default: '',
    doc: 'earlier keys that still decrypt, `id:base64` separated by commas, while `npm run secret -- rotate` re-encrypts everything to the current key; a start with a value under an id no key has fails',
    parse: optional,
  },
  {
    key: 'sessionLeaseMs',
    env: 'QL_SESSION_LEASE_MS',
    default: '30000',
    doc: 'session lease a registration or heartbeat grants (5 s … 10 min)',
    parse: int(5_000, 600_000),
  },
  {
    key: 'protocolMin',
    env: 'QL_PROTOCOL_MIN',
    default: '3',
    doc: 'the lowest protocol version a worker may register with (3: wire v1, 4: wire v2; this control plane serves 3..4): below it, register is 400 `protocol_unsupported` and the worker exits 15. Raise it to 4 only once every worker speaks v2 (ADR 0060)',
    parse: int(3, 4),
  },
  {
    key: 'protocolMax',
    env: 'QL_PROTOCOL_MAX',
    default: '4',
    doc: 'the highest protocol version a worker may register with (3 or 4, at least `QL_PROTOCOL_MIN`): 3 serves wire v1 only and reads every request as a v1 control plane did (a newer field is 400 `invalid_worker_request`), to hold a plane back or to check that a fleet speaks v1 (ADR 0062)',
    parse: int(3, 4),
  },
  {
    key: 'heartbeatBatchWindowMs',
    env: 'QL_HEARTBEAT_BATCH_WINDOW_MS',
    default: '2',
    doc: 'heartbeats a replica receives within this many ms share one statement and one commit, each still its own fenced compare-and-set with its own answer (0 … 50); 0 sends each alone',
    parse: int(0, 50),
  },
  {
    key: 'heartbeatBatchMax',
    env: 'QL_HEARTBEAT_BATCH_MAX',
    default: '64',
    doc: 'a heartbeat batch is sent at once when it holds this many (1 … 1000); 1 sends each alone',
    parse: int(1, 1_000),
  },
  {
    key: 'claimBatchMax',
    env: 'QL_CLAIM_BATCH_MAX',
    default: '32',
    doc: "PostgreSQL: claims that queue while this replica's claim statement is busy go out together, at most this many per statement, each still its own fenced claim with its own answer (1 … 256); 1 sends each alone",
    parse: int(1, 256),
  },
  {
    key: 'runLeaseMs',
    env: 'QL_RUN_LEASE_MS',
    default: '60000',
    doc: 'run lease a claim or renewal grants (5 s … 10 min); an unrenewed lease expires and the sweeper acts',
    parse: int(5_000, 600_000),
  },
  {
    key: 'placementPreferenceHoldMs',
    env: 'QL_PLACEMENT_PREFERENCE_HOLD_MS',
    default: '5000',
    doc: 'for this long after a run with preferred labels is queued, a puller leaves it to a live worker with a free slot and a higher preferred score; 0 turns holding off',
    parse: int(0, 60_000),
  },
  {
    key: 'offerWaitMaxMs',
    env: 'QL_OFFER_WAIT_MAX_MS',
    default: '20000',
    doc: 'longest a pull with nothing to claim is held (long poll; the pull asks for its `waitMs`, 0 … 20000, and gets at most this); 0 answers every pull at once',
    parse: int(0, 20_000),
  },
  {
    key: 'offerRecheckMs',
    env: 'QL_OFFER_RECHECK_MS',
    default: '1000',
    doc: 'a held pull claims again at least this often even when no signal woke it (a safety net for a lost notification or an expired placement hold)',
    parse: int(10, 60_000),
  },
  {
    key: 'sweepIntervalMs',
    env: 'QL_SWEEP_INTERVAL_MS',
    default: '1000',
    doc: 'pause between lease sweeper cycles (expired leases, due retries); 0 turns the sweeper off',
    parse: int(0, 600_000),
  },
  {
    key: 'sweepPageSize',
    env: 'QL_SWEEP_PAGE_SIZE',
    default: '64',
    doc: 'expired leases and due retries one sweeper cycle handles at most, each (fixed work per cycle)',
    parse: int(1, 64),
  },
  {
    key: 'runDeadlineGraceMs',
    env: 'QL_RUN_DEADLINE_GRACE_MS',
    default: '30000',
    doc: 'an attempt still starting or running this long after its deadline (start + the task timeout) is timed out by the sweeper',
    parse: int(0, 600_000),
  },
  {
    key: 'runLogCapBytes',
    env: 'QL_RUN_LOG_CAP_BYTES',
    default: String(RUN_LOG_LIMITS.defaultRunCapBytes),
    doc: 'stored output per run (64 KiB … 64 MiB); past it one truncation marker is kept and later chunks are dropped',
    parse: int(64 * 1024, 64 * 1024 * 1024),
  },
  {
    key: 'bundleMaxBytes',
    env: 'QL_BUNDLE_MAX_BYTES',
    default: String(32 * 1024 * 1024),
    doc: 'largest script bundle an upload may store (1 KiB … 256 MiB): the .tar.gz as sent, or one file once packed; a larger body is refused with 413 before it is read through (ADR 0051)',
    parse: int(1024, 256 * 1024 * 1024),
  },
  {
    key: 'bundleUploadsMax',
    env: 'QL_BUNDLE_UPLOADS_MAX',
    default: '2',
    doc: 'bundle uploads whose body is received at once (1 … 64), each up to QL_BUNDLE_MAX_BYTES in memory; past it 503 `bundle_uploads_busy` with `Retry-After`, before the body is read (issue 27)',
    parse: int(1, 64),
  },
  {
    key: 'cronTickMs',
    env: 'QL_CRON_TICK_MS',
    default: '5000',
    doc: 'pause between cron trigger ticks; each scheduled time makes one run across all replicas; 0 turns cron off',
    parse: int(0, 60_000),
  },
  {
    key: 'revocationCacheMs',
    env: 'QL_REVOCATION_CACHE_MS',
    default: '2000',
    doc: 'how long a replica trusts its last look at a certificate revocation (0 … 5000; a revocation is enforced by every replica within this)',
    parse: int(0, 5_000),
  },
  {
    key: 'ingressConnectionMaxMs',
    env: 'QL_INGRESS_CONNECTION_MAX_MS',
    default: '600000',
    doc: 'how long one worker connection to the ingress serves requests (1 s … 24 h); once older, its answers say `Connection: close` and it is closed when idle, or after as long again when a request is still in flight (the certificate is checked on every request regardless)',
    parse: int(1_000, 86_400_000),
  },
  {
    key: 'ingressHandshakeTimeoutMs',
    env: 'QL_INGRESS_HANDSHAKE_TIMEOUT_MS',
    default: '10000',
    doc: 'a TLS handshake on the ingress that has not finished within this is closed (100 ms … 2 min)',
    parse: int(100, 120_000),
  },
  {
    key: 'ingressUncredentialedTimeoutMs',
    env: 'QL_INGRESS_UNCREDENTIALED_TIMEOUT_MS',
    default: '10000',
    doc: 'an ingress connection without a trusted client certificate (enrollment) must send each request, head and body, within this of its start or of its previous answer, else it is closed (100 ms … 10 min)',
    parse: int(100, 600_000),
  },
  {
    key: 'ingressUncredentialedPerAddress',
    env: 'QL_INGRESS_UNCREDENTIALED_PER_ADDRESS',
    default: '16',
    doc: 'ingress connections one source address may hold in their TLS handshake, and as many without a trusted client certificate; more are closed at once (1 … 10000)',
    parse: int(1, 10_000),
  },
  {
    key: 'ingressUncredentialedMax',
    env: 'QL_INGRESS_UNCREDENTIALED_MAX',
    default: '128',
    doc: 'the same for the ingress listener as a whole, all addresses together (1 … 100000; at least `QL_INGRESS_UNCREDENTIALED_PER_ADDRESS`)',
    parse: int(1, 100_000),
  },
  {
    key: 'ingressRatePerSecond',
    env: 'QL_INGRESS_RATE_PER_SECOND',
    default: '50',
    doc: 'the least sustained rate of one worker: ingress requests per second, all its routes together, before 429 with `Retry-After` (the worker’s slots may raise it, `QL_INGRESS_RATE_PER_SLOT`)',
    parse: int(1, 100_000),
  },
  {
    key: 'ingressRateBurst',
    env: 'QL_INGRESS_RATE_BURST',
    default: '100',
    doc: 'the least burst of one worker: requests it may send at once after a quiet spell, all its routes together',
    parse: int(1, 100_000),
  },
  {
    key: 'ingressRatePerSlot',
    env: 'QL_INGRESS_RATE_PER_SLOT',
    default: '250',
    doc: 'requests per second a worker gets for each of its slots (`maxConcurrentRuns`, as its session says), with a burst of twice that, when more than the two settings above; 0: the same flat limit for every worker',
    parse: int(0, 100_000),
  },
  {
    key: 'consoleDir',
    env: 'QL_CONSOLE_DIR',
    default: '',
    doc: 'folder of the built web console the admin listener serves at `/`; empty: the one `npm run build` made (`dist/console`)',
    parse: optional,
  },
  {
    key: 'consoleSessionIdleMs',
    env: 'QL_CONSOLE_SESSION_IDLE_MS',
    default: '900000',
    doc: 'a console (browser) session ends after this long without a request (1 s … 24 h; default 15 min)',
    parse: int(1_000, 86_400_000),
  },
  {
    key: 'consoleSessionMaxMs',
    env: 'QL_CONSOLE_SESSION_MAX_MS',
    default: '43200000',
    doc: 'a console session ends this long after sign-in whatever its use (1 s … 7 d; default 12 h)',
    parse: int(1_000, 604_800_000),
  },
  {
    key: 'consoleCookieSecure',
    env: 'QL_CONSOLE_COOKIE_SECURE',
    default: 'auto',
    doc: '`Secure` on the console session cookie: `auto` when the request came over TLS, `always` behind a TLS-terminating proxy, `never`',
    parse: oneOf(['auto', 'always', 'never'] as const),
  },
  {
    key: 'shutdownGraceMs',
    env: 'QL_SHUTDOWN_GRACE_MS',
    default: '10000',
    doc: 'how long SIGTERM waits for in-flight requests; past it their connections are cut off and the plane stops cleanly',
    parse: int(0, 600_000),
  },
  {
    key: 'logLevel',
    env: 'QL_LOG_LEVEL',
    default: 'info',
    doc: '`debug`, `info`, `warn` or `error`',
    parse: oneOf(['debug', 'info', 'warn', 'error'] as const),
  },
] as const satisfies readonly Setting<ControlPlaneConfig>[];

/** A database URL with its password masked, for messages. */
export function redactDatabaseUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@');
}

/** `sqlite:<file>` or a PostgreSQL URL that parses: a typo is a configuration error, not a failed start. */
function databaseUrl(raw: string, name: string): string {
  const shown = `${name}=${redactDatabaseUrl(raw)}`;
  if (raw.startsWith('sqlite:')) {
    if (!raw.slice('sqlite:'.length).replace(/^\/\//, '').trim())
      throw new ConfigError(`${shown} names no file, e.g. sqlite:./var/ql.sqlite`);
    return raw;
  }
  if (!/^postgres(ql)?:\/\//.test(raw))
    throw new ConfigError(`${shown} must start with sqlite: or postgres://`);
  try {
    new URL(raw);
  } catch {
    throw new ConfigError(`${shown} is not a valid URL (postgres://user@host:port/database)`);
  }
  return raw;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): ControlPlaneConfig {
  const result = readSettings<ControlPlaneConfig>(SETTINGS as readonly Setting<ControlPlaneConfig>[], env, {
    prefix: 'QL_',
    ignore: /^QL_(TEST|WORKER)_/,
  });
  if (result.profile === 'cluster-control' && !/^postgres(ql)?:\/\//.test(result.databaseUrl)) {
    throw new ConfigError('QL_PROFILE=cluster-control refuses SQLite: set QL_DATABASE_URL=postgres://…');
  }
  if (sameListenAddress(result))
    throw new ConfigError(
      `QL_ADMIN_PORT and QL_INGRESS_PORT are both ${result.adminPort}: the admin API and the worker ingress need a port each`,
    );
  checkWorkerIssuer(result);
  if (result.ingressUncredentialedPerAddress > result.ingressUncredentialedMax)
    throw new ConfigError(
      `QL_INGRESS_UNCREDENTIALED_PER_ADDRESS=${result.ingressUncredentialedPerAddress} is over QL_INGRESS_UNCREDENTIALED_MAX=${result.ingressUncredentialedMax}`,
    );
  if (result.protocolMin > result.protocolMax)
    throw new ConfigError(
      `QL_PROTOCOL_MIN=${result.protocolMin} is over QL_PROTOCOL_MAX=${result.protocolMax}: no protocol version would be served`,
    );
  secretCipherOf(result);
  return result;
}

/** Both listeners on one port of one address (or of every address): the second could never bind. */
function sameListenAddress(c: ControlPlaneConfig): boolean {
  const any = (host: string) => ['0.0.0.0', '::', '[::]'].includes(host);
  return (
    c.adminPort !== 0 &&
    c.adminPort === c.ingressPort &&
    (c.adminHost === c.ingressHost || any(c.adminHost) || any(c.ingressHost))
  );
}

/** The issuer is all or nothing: a certificate and exactly one source of its key (ADR 0045 §5). */
function checkWorkerIssuer(c: ControlPlaneConfig): void {
  if (c.workerIssuerKeyPem && c.workerIssuerKeyPath)
    throw new ConfigError('set QL_WORKER_ISSUER_KEY or QL_WORKER_ISSUER_KEY_PEM, not both');
  const hasKey = Boolean(c.workerIssuerKeyPem || c.workerIssuerKeyPath);
  if (hasKey !== Boolean(c.workerIssuerCertPath))
    throw new ConfigError(
      hasKey
        ? 'QL_WORKER_ISSUER_KEY(_PEM) needs QL_WORKER_ISSUER_CERT, the certificate of that key'
        : 'QL_WORKER_ISSUER_CERT needs its key: QL_WORKER_ISSUER_KEY (a file) or QL_WORKER_ISSUER_KEY_PEM',
    );
}

/** The README's configuration table. */
export function configTable(): string {
  return settingsTable(
    SETTINGS as readonly Setting<ControlPlaneConfig>[],
    { profile: 'standalone', devPki: true, devPkiDir: '$QL_DEV_PKI_DIR' },
    'derived from the settings above (shown for `standalone`).',
  );
}
