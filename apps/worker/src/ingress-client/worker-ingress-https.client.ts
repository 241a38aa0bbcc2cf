// Size: every rule of R-WIRE-4 (one socket per origin, TLS 1.3, credential re-read, fingerprinted
// agent, no SNI for IPs, bounded request and response, strict answers) and the move between origins
// (R-WRK-7) sit in this one client on purpose.
import { createHash } from 'node:crypto';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { SecureContext, createSecureContext } from 'node:tls';
import type { Socket } from 'node:net';
import {
  BUNDLE_MEDIA_TYPE,
  INGRESS_ACTIONS,
  INGRESS_CALLS,
  INGRESS_CERTIFICATE_ACTION,
  INGRESS_ENROLL_PATH,
  IngressAction,
  IngressCall,
  HeartbeatResponse,
  RegisterResponse,
  SessionResponse,
  ingressBodyLimit,
  ingressCertificatePath,
  ingressPath,
  refuseNewerAnswerFields,
  shapeRequest,
  v1LogText,
  WireVersion,
} from '@ql/contracts';
import { isUuidV7, isWorkerId } from '@ql/domain';
import { monotonicNow } from '../host/monotonic';
import { parseRetryAfter } from './retry-after';
import { ServerClock } from './server-clock';
import {
  IngressOrigin,
  describeFailures,
  describeUnreachable,
  movesToNextOrigin,
  parseIngressOrigins,
} from './ingress-origins';

/** R-WIRE-4 / §12: no ingress answer may be larger than this. */
export const INGRESS_RESPONSE_CAP_BYTES = 128 * 1024;
/** A certificate and its chain: a few KiB. */
const CERTIFICATE_ANSWER_CAP = 64 * 1024;

/**
 * PEM material for one call; asked of the provider every time so rotation needs no restart. A provider
 * returning the very same buffers (or strings) as last time means "unchanged": they are not hashed
 * again, so new material must come in new buffers, never written into the old ones.
 */
export interface WorkerTlsCredentials {
  readonly certPem: string | Buffer;
  readonly keyPem: string | Buffer;
  readonly caPem: string | Buffer;
}
export type WorkerCredentialsProvider = () => WorkerTlsCredentials | Promise<WorkerTlsCredentials>;

export interface WorkerIngressClientOptions {
  /**
   * `https://host:port` of each ingress listener (the control-plane replicas, 1..8). Calls go to the
   * origin that last worked and move to the next on a transport failure (R-WRK-7).
   */
  readonly origins: readonly string[];
  readonly workerId: string;
  readonly credentials: WorkerCredentialsProvider;
  /** Deadline of one call, connect to last byte, across every origin it tries. */
  readonly timeoutMs?: number;
  /**
   * Told once per change of the origin that answers (not per call): the call that first got an
   * answer from another origin than the last one, with what failed on the origins it left.
   */
  readonly onOriginChange?: (change: OriginChange) => void;
}

/** The origin that answers changed: `from` (the one that answered before) to `to`. */
export interface OriginChange {
  readonly from: string;
  readonly to: string;
  readonly action: string;
  /** Each origin this call tried before `to`, with its code and reason (`describeFailures`). */
  readonly cause: string;
}

export interface IngressCallOptions {
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
  /** Lower the 128 KiB response cap for a call whose answer is known to be small. */
  readonly maxResponseBytes?: number;
  /**
   * Reads a 200 answer from its exact bytes (a contract's strict parser) instead of `JSON.parse`; what
   * it throws becomes `invalid_response`, and what it returns is the call's result.
   */
  readonly parse?: (bytes: Buffer) => unknown;
  /**
   * `pull`: the call goes on a second keep-alive socket of its own per origin, so a long-poll pull
   * held by the control plane never queues the other calls behind it (ADR 0019).
   */
  readonly lane?: 'pull';
}

/** What each action answers on 200; actions not implemented by the worker yet answer `unknown`. */
export interface IngressResponses {
  register: RegisterResponse;
  heartbeat: HeartbeatResponse;
  drain: SessionResponse;
  offline: SessionResponse;
}
export type IngressResponse<A extends IngressAction> = A extends keyof IngressResponses
  ? IngressResponses[A]
  : unknown;

/** Failures the client detects itself (status 0 unless an HTTP status was received). */
export const CLIENT_ERROR_CODES = [
  'client_closed',
  'unknown_action',
  'invalid_request',
  'request_too_large',
  'credentials_unavailable',
  'credentials_invalid',
  'transport_error',
  'connect_timeout',
  'control_plane_unavailable',
  'timeout',
  'aborted',
  'redirect',
  'compressed_response',
  'not_json',
  'response_too_large',
  'length_mismatch',
  'invalid_json',
  'unexpected_status',
  'invalid_response',
] as const;
export type IngressClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];

/** One failed ingress call: the HTTP status (0 when none was received), a stable code and reason. */
export class IngressCallError extends Error {
  override readonly name = 'IngressCallError';
  constructor(
    readonly action: string,
    readonly status: number,
    readonly code: string,
    message: string,
    readonly reason?: string,
    /** The answer's `Retry-After` (a 429, a 503): how long the control plane asked the worker to wait. */
    readonly retryAfterMs?: number,
  ) {
    super(`${action}: ${message}`);
  }

  /** 409: the control plane refused this session or lease for good (R-REG-5). */
  get fenced(): boolean {
    return this.status === 409;
  }
}

interface AgentEntry {
  readonly agent: Agent;
  readonly sockets: Set<Socket>;
  inflight: number;
  retired: boolean;
}

/** One try of a call on one origin. */
interface Attempt {
  readonly target: IngressOrigin;
  readonly entry: AgentEntry;
  readonly path: string;
  readonly payload: Buffer;
  readonly cap: number;
  /** What is left of the call's deadline. */
  readonly timeoutMs: number;
  /** With several origins, the connection (TCP + TLS) must stand within this origin's share. */
  readonly connectTimeoutMs: number | undefined;
}

/**
 * The worker's one HTTPS client for every ingress call (R-WIRE-4). One keep-alive TLS 1.3 socket per
 * origin, bounded requests and responses, nothing but a 200 JSON answer of the declared length counts
 * as success. With several origins (R-WRK-7) a call starts at the origin that last worked and moves
 * on at once on a transport failure; the body — session, fence and all — is the same on every origin.
 * Building it opens nothing: an origin's agent is made on its first call.
 */
export class WorkerIngressHttpsClient {
  private readonly targets: readonly IngressOrigin[];
  private readonly timeoutMs: number;
  /** Fingerprint and context of the credentials the current agents were made with. */
  private credentialSet:
    | { readonly fingerprint: string; readonly context: SecureContext; parts: WorkerTlsCredentials }
    | undefined;
  /** Per origin and lane (the one socket of ordinary calls, the one of long-poll pulls). */
  private readonly current = new Map<IngressOrigin, Map<string, AgentEntry>>();
  private readonly entries = new Set<AgentEntry>();
  /** Index of the origin the next call tries first: the one that last answered. */
  private preferred = 0;
  /** Index of the origin that answered last (the first origin until one answers): failover lines. */
  private answering = 0;
  private closed = false;
  private wireVersion: WireVersion = 2;
  /** The control plane's clock, from the `Date` header of every 200 answer (lease expiries are its time). */
  readonly serverClock = new ServerClock();

  constructor(private readonly options: WorkerIngressClientOptions) {
    this.targets = parseIngressOrigins(options.origins);
    if (!isWorkerId(options.workerId)) throw new TypeError('WorkerIngressHttpsClient: invalid worker id');
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  /** A control-plane (database) time, such as a lease expiry, on this process's monotonic clock. */
  toLocalTime(serverMs: number): number {
    return this.serverClock.toLocal(serverMs);
  }

  /** The origin the next call goes to first (sticky: the last one that answered). */
  get preferredOrigin(): string {
    return this.targets[this.preferred]!.origin;
  }

  /** POSTs `body` to one ingress action of one session and returns the parsed 200 answer. */
  async call<A extends IngressAction>(
    action: A,
    sessionId: string,
    body: unknown,
    options: IngressCallOptions = {},
  ): Promise<IngressResponse<A>> {
    if (this.closed) throw new IngressCallError(action, 0, 'client_closed', 'the ingress client is closed');
    if (!(INGRESS_ACTIONS as readonly string[]).includes(action)) {
      throw new IngressCallError(String(action), 0, 'unknown_action', 'not an ingress action');
    }
    if (!isUuidV7(sessionId))
      throw new IngressCallError(action, 0, 'invalid_request', 'session id is not a UUIDv7');
    const payload = payloadOf(action, this.wireVersion === 1 ? v1Body(action, body) : body);
    const cap = Math.min(options.maxResponseBytes ?? INGRESS_RESPONSE_CAP_BYTES, INGRESS_RESPONSE_CAP_BYTES);
    const context = await this.currentContext(action);
    const path = ingressPath(this.options.workerId, sessionId, action);
    const checked = this.wireVersion === 1 ? { ...options, parse: v1Reader(action, options.parse) } : options;
    return (await this.sendToOrigins(action, checked, context, path, payload, cap)) as IngressResponse<A>;
  }

  /**
   * ADR 0060: the wire version of the session the worker registered (v2 until it registered with 3).
   * In a v1 session every answer is read as v1 is: a field newer than v1 is `invalid_response`; and
   * every request is sent as v1 has it (ADR 0062): no field newer than v1, output text as v1 took it.
   */
  get spoken(): WireVersion {
    return this.wireVersion;
  }

  speak(version: WireVersion): void {
    this.wireVersion = version;
  }

  /**
   * Joining (ADR 0045 §2): `POST …/enroll` over server-authenticated TLS, without a client
   * certificate (the worker has none yet), on a one-off socket per origin tried.
   */
  async enroll(body: unknown, caPem: string | Buffer, options: IngressCallOptions = {}): Promise<unknown> {
    this.checkOpen('enroll');
    const payload = payloadOf('enroll', body);
    let context: SecureContext;
    try {
      context = createSecureContext({ minVersion: 'TLSv1.3', ca: caPem });
    } catch (error) {
      throw new IngressCallError(
        'enroll',
        0,
        'credentials_invalid',
        'the CA bundle cannot be used',
        errorCode(error),
      );
    }
    return this.sendToOrigins(
      'enroll',
      options,
      context,
      INGRESS_ENROLL_PATH,
      payload,
      CERTIFICATE_ANSWER_CAP,
      () => this.oneOffAgent(context),
    );
  }

  /** Rotation (ADR 0045 §3): `POST …/workers/{id}/certificate` over mTLS with the current credentials. */
  async renewCertificate(body: unknown, options: IngressCallOptions = {}): Promise<unknown> {
    this.checkOpen(INGRESS_CERTIFICATE_ACTION);
    const payload = payloadOf(INGRESS_CERTIFICATE_ACTION, body);
    const context = await this.currentContext(INGRESS_CERTIFICATE_ACTION);
    const path = ingressCertificatePath(this.options.workerId);
    return this.sendToOrigins(
      INGRESS_CERTIFICATE_ACTION,
      options,
      context,
      path,
      payload,
      CERTIFICATE_ANSWER_CAP,
    );
  }

  private checkOpen(action: string): void {
    if (this.closed) throw new IngressCallError(action, 0, 'client_closed', 'the ingress client is closed');
  }

  /** The TLS context of the credentials the provider gives now (read again at most once a second). */
  private async currentContext(action: string): Promise<SecureContext> {
    let credentials: WorkerTlsCredentials;
    try {
      credentials = await this.options.credentials();
    } catch (error) {
      const detail = error instanceof Error ? `: ${error.message}` : '';
      throw new IngressCallError(
        action,
        0,
        'credentials_unavailable',
        `could not read the TLS credentials${detail}`,
        errorCode(error),
      );
    }
    this.checkOpen(action);
    return this.contextFor(action, credentials);
  }

  /** An agent for one call (enrollment): no keep-alive, destroyed when the call ends (retired). */
  private oneOffAgent(secureContext: SecureContext): AgentEntry {
    const entry: AgentEntry = {
      agent: new Agent({ keepAlive: false, maxSockets: 1, secureContext }),
      sockets: new Set(),
      inflight: 0,
      retired: true,
    };
    this.entries.add(entry);
    return entry;
  }

  /**
   * ADR 0051: the one streamed call, `bundle`. POSTs `body` to the origin that last answered, on a
   * socket of its own (a download never holds the calls' socket), and resolves once a 200
   * `application/octet-stream` answer of at most `maxBytes` (its Content-Length) begins: the caller
   * reads the stream. Any other answer is read as a refusal and rejects like `call` (a 409 fence, a
   * 404). No failover mid-download: the worker retries the whole fetch.
   */
  async download(
    sessionId: string,
    body: unknown,
    options: { readonly signal?: AbortSignal; readonly maxBytes: number; readonly timeoutMs?: number },
  ): Promise<IncomingMessage> {
    const action = 'bundle';
    if (this.closed) throw new IngressCallError(action, 0, 'client_closed', 'the ingress client is closed');
    if (!isUuidV7(sessionId))
      throw new IngressCallError(action, 0, 'invalid_request', 'session id is not a UUIDv7');
    const payload = Buffer.from(JSON.stringify(body ?? null), 'utf8');
    let credentials: WorkerTlsCredentials;
    try {
      credentials = await this.options.credentials();
    } catch (error) {
      throw new IngressCallError(
        action,
        0,
        'credentials_unavailable',
        'could not read the TLS credentials',
        errorCode(error),
      );
    }
    const context = this.contextFor(action, credentials);
    const target = this.targets[this.preferred]!;
    const entry = this.agentFor(target, context, 'bundle');
    const path = ingressPath(this.options.workerId, sessionId, action);
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    entry.inflight++;
    const done = () => {
      entry.inflight--;
      if (entry.retired && entry.inflight === 0) this.destroy(entry);
    };
    return new Promise<IncomingMessage>((resolve, reject) => {
      let settled = false;
      const fail = (error: IngressCallError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        done();
        reject(error);
      };
      const timer = setTimeout(
        () => fail(new IngressCallError(action, 0, 'timeout', `no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      timer.unref();
      const onAbort = () => fail(new IngressCallError(action, 0, 'aborted', 'the call was aborted'));
      const req = this.open(target, entry, path, payload.length);
      options.signal?.addEventListener('abort', onAbort, { once: true });
      req.on('socket', (socket: Socket) => {
        if (!entry.sockets.has(socket)) {
          entry.sockets.add(socket);
          socket.once('close', () => entry.sockets.delete(socket));
        }
      });
      req.on('error', (error) =>
        fail(
          new IngressCallError(
            action,
            0,
            'transport_error',
            `transport failed: ${errorCode(error)}`,
            errorCode(error),
          ),
        ),
      );
      req.on('response', (res: IncomingMessage) => {
        const mediaType = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        const declared = Number(res.headers['content-length']);
        if (res.statusCode === 200 && mediaType === BUNDLE_MEDIA_TYPE) {
          if (!Number.isSafeInteger(declared) || declared < 0 || declared > options.maxBytes)
            return fail(
              new IngressCallError(
                action,
                200,
                'response_too_large',
                `the bundle declares ${res.headers['content-length']} bytes; the cap is ${options.maxBytes}`,
              ),
            );
          settled = true;
          clearTimeout(timer);
          res.once('close', () => {
            options.signal?.removeEventListener('abort', onAbort);
            done();
          });
          options.signal?.addEventListener('abort', () => res.destroy(new Error('aborted')), { once: true });
          return resolve(res);
        }
        // A refusal: read it as every other answer is read (JSON, capped), and reject with its code.
        this.read(
          res,
          monotonicNow(),
          INGRESS_RESPONSE_CAP_BYTES,
          undefined,
          (status, code, message, reason, retryAfterMs) =>
            fail(new IngressCallError(action, status, code, message, reason, retryAfterMs)),
          () =>
            fail(
              new IngressCallError(
                action,
                res.statusCode ?? 0,
                'invalid_response',
                'a 200 answer that is not a bundle',
              ),
            ),
          () => undefined,
        );
      });
      req.end(payload);
    });
  }

  /**
   * R-WRK-7: the origin that last answered first, then the others in order, each once, within one
   * deadline; only a failure of the replica or the path to it moves the call on (`movesToNextOrigin`).
   */
  private async sendToOrigins(
    action: string,
    options: IngressCallOptions,
    context: SecureContext,
    path: string,
    payload: Buffer,
    cap: number,
    agentOf: (target: IngressOrigin) => AgentEntry = (target) =>
      this.agentFor(target, context, options.lane ?? 'calls'),
  ): Promise<unknown> {
    const deadline = Date.now() + (options.timeoutMs ?? this.timeoutMs);
    const count = this.targets.length;
    const first = this.preferred;
    const failures: { readonly origin: string; readonly error: IngressCallError }[] = [];
    for (let i = 0; i < count; i++) {
      const index = (first + i) % count;
      const target = this.targets[index]!;
      const remaining = Math.max(1, deadline - Date.now());
      const entry = agentOf(target);
      entry.inflight++;
      try {
        const value = await this.send(action, options, {
          target,
          entry,
          path,
          payload,
          cap,
          timeoutMs: remaining,
          // Each origin left gets an equal share of the deadline to connect, so one dead host cannot eat it all.
          connectTimeoutMs: count > 1 ? Math.max(1, Math.floor(remaining / (count - i))) : undefined,
        });
        this.preferred = index;
        if (index !== this.answering) this.originChanged(action, index, failures);
        return value;
      } catch (error) {
        if (!(error instanceof IngressCallError)) throw error;
        const moves = movesToNextOrigin(error);
        // Sticky: an origin that answered keeps the preference; one that failed hands it to the next.
        this.preferred = moves || error.code === 'timeout' ? (index + 1) % count : index;
        if (!moves || this.closed || options.signal?.aborted) throw error;
        failures.push({ origin: target.origin, error });
      } finally {
        entry.inflight--;
        if (entry.retired && entry.inflight === 0) this.destroy(entry);
      }
    }
    if (failures.length === 1) throw failures[0]!.error;
    const last = failures[failures.length - 1]!.error;
    throw new IngressCallError(
      action,
      last.status,
      'control_plane_unavailable',
      describeUnreachable(failureParts(failures)),
      last.code,
    );
  }

  /** One report per change of the answering origin; concurrent calls that follow it report nothing. */
  private originChanged(
    action: string,
    index: number,
    failures: readonly { readonly origin: string; readonly error: IngressCallError }[],
  ): void {
    const from = this.targets[this.answering]!.origin;
    this.answering = index;
    this.options.onOriginChange?.({
      from,
      to: this.targets[index]!.origin,
      action,
      cause: failures.length ? describeFailures(failureParts(failures)) : 'an earlier call moved on',
    });
  }

  /** Destroys every agent and resolves once their sockets are closed; later calls fail. */
  async close(): Promise<void> {
    this.closed = true;
    this.current.clear();
    const closing: Promise<void>[] = [];
    for (const entry of [...this.entries]) closing.push(...this.destroy(entry));
    await Promise.all(closing);
  }

  /**
   * Agents are keyed by a SHA-256 of cert + key + CA: new material retires every origin's agent (each
   * goes once its last call ends) and the next call on an origin makes a new one.
   */
  private contextFor(action: string, credentials: WorkerTlsCredentials): SecureContext {
    const known = this.credentialSet;
    if (known && sameParts(known.parts, credentials)) return known.context; // the very same buffers: no hash
    const fingerprint = credentialFingerprint(credentials);
    if (known?.fingerprint === fingerprint) {
      known.parts = credentials;
      return known.context;
    }
    let secureContext: SecureContext;
    try {
      // Parsed once per credential set: a bad PEM fails here, clearly, before any connection.
      secureContext = createSecureContext({
        minVersion: 'TLSv1.3',
        cert: credentials.certPem,
        key: credentials.keyPem,
        ca: credentials.caPem,
      });
    } catch (error) {
      throw new IngressCallError(
        action,
        0,
        'credentials_invalid',
        'the TLS credentials cannot be used',
        errorCode(error),
      );
    }
    this.credentialSet = { fingerprint, context: secureContext, parts: credentials };
    for (const previous of [...this.current.values()].flatMap((lanes) => [...lanes.values()])) {
      previous.retired = true;
      // A call still running on the old credentials finishes first; the agent goes right after it.
      if (previous.inflight === 0) this.destroy(previous);
    }
    this.current.clear();
    return secureContext;
  }

  /** The one agent (one keep-alive socket) of an origin and lane for the current credentials. */
  private agentFor(target: IngressOrigin, secureContext: SecureContext, lane: string): AgentEntry {
    const lanes = this.current.get(target) ?? new Map<string, AgentEntry>();
    this.current.set(target, lanes);
    const existing = lanes.get(lane);
    if (existing) return existing;
    const entry: AgentEntry = {
      agent: new Agent({
        keepAlive: true,
        maxSockets: 1,
        maxFreeSockets: 1,
        maxTotalSockets: 1,
        secureContext,
      }),
      sockets: new Set(),
      inflight: 0,
      retired: false,
    };
    this.entries.add(entry);
    lanes.set(lane, entry);
    return entry;
  }

  private destroy(entry: AgentEntry): Promise<void>[] {
    this.entries.delete(entry);
    const closing = [...entry.sockets].map((socket) =>
      socket.closed
        ? Promise.resolve()
        : new Promise<void>((resolve) => socket.once('close', () => resolve())),
    );
    entry.agent.destroy();
    return closing;
  }

  private send(action: string, options: IngressCallOptions, attempt: Attempt): Promise<unknown> {
    const { target, entry, path, payload, cap, timeoutMs, connectTimeoutMs } = attempt;
    return new Promise((resolve, reject) => {
      let settled = false;
      let complete = false; // the whole answer was read: the socket may go back to the pool
      let req: ClientRequest | undefined;
      const fail = (
        status: number,
        code: IngressClientErrorCode | string,
        message: string,
        reason?: string,
        retryAfterMs?: number,
      ) => finish(new IngressCallError(action, status, code, message, reason, retryAfterMs));
      const finish = (error: IngressCallError | null, value?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(connectTimer);
        options.signal?.removeEventListener('abort', onAbort);
        if (error) {
          // The socket may hold half a response: never hand it back to the pool.
          if (!complete) req?.destroy();
          reject(error);
        } else {
          resolve(value);
        }
      };
      const onAbort = () => fail(0, 'aborted', 'the call was aborted');
      const timer = setTimeout(
        () => fail(0, 'timeout', `no complete answer within ${timeoutMs} ms`),
        timeoutMs,
      );
      timer.unref();
      const connectTimer =
        connectTimeoutMs === undefined || connectTimeoutMs >= timeoutMs
          ? undefined
          : setTimeout(
              () =>
                fail(0, 'connect_timeout', `no connection to ${target.origin} within ${connectTimeoutMs} ms`),
              connectTimeoutMs,
            );
      connectTimer?.unref();
      if (options.signal?.aborted) return onAbort();
      options.signal?.addEventListener('abort', onAbort, { once: true });

      // Before the request leaves: the bound the answer's `Date` converts lease times with (ServerClock).
      const sentAtMs = monotonicNow();
      try {
        req = this.open(target, entry, path, payload.length);
      } catch (error) {
        return fail(
          0,
          'transport_error',
          `could not open the request: ${errorCode(error)}`,
          errorCode(error),
        );
      }
      const request = req;
      req.on('socket', (socket: Socket) => {
        // A kept-alive socket is connected already; a new one counts once its TLS handshake is done.
        // A call that waited for the agent's one socket gets it when the previous call frees it: then
        // `reusedSocket` is false (Node sets it only for a socket taken from the free pool) though the
        // socket is connected, and `secureConnect` will not come again. `connecting` is true from a
        // new socket's creation until its TCP connect, which cannot complete before this event.
        // Such a call used to add a listener that never fired: on the long-lived keep-alive socket it
        // held the call's closure (payload, answer) for the socket's life, and its connect timer ran on
        // (ADR 0049: the worker's growth under load).
        if (request.reusedSocket || !socket.connecting) clearTimeout(connectTimer);
        else socket.once('secureConnect', () => clearTimeout(connectTimer));
        if (!entry.sockets.has(socket)) {
          entry.sockets.add(socket);
          socket.once('close', () => entry.sockets.delete(socket));
        }
      });
      req.on('error', (error) =>
        this.closed
          ? fail(0, 'client_closed', 'the ingress client was closed during the call')
          : fail(0, 'transport_error', `transport failed: ${errorCode(error)}`, errorCode(error)),
      );
      req.on('response', (res: IncomingMessage) =>
        this.read(
          res,
          sentAtMs,
          cap,
          options.parse,
          fail,
          (value) => {
            complete = true;
            finish(null, value);
          },
          () => (complete = true),
        ),
      );
      req.end(payload);
    });
  }

  private open(target: IngressOrigin, entry: AgentEntry, path: string, length: number): ClientRequest {
    return httpsRequest({
      protocol: 'https:',
      hostname: target.hostname,
      port: target.port,
      path,
      method: 'POST',
      agent: entry.agent,
      // RFC 6066 forbids an IP address as server name: send no SNI; the certificate is still checked against the IP.
      ...(target.hostIsIp ? { servername: '' } : {}),
      headers: {
        'content-type': 'application/json',
        'content-length': String(length),
        accept: 'application/json',
        'accept-encoding': 'identity',
      },
    });
  }

  private read(
    res: IncomingMessage,
    sentAtMs: number,
    cap: number,
    parse: IngressCallOptions['parse'],
    fail: (status: number, code: string, message: string, reason?: string, retryAfterMs?: number) => void,
    succeed: (value: unknown) => void,
    readToEnd: () => void,
  ): void {
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400)
      return fail(status, 'redirect', `redirects are not followed (status ${status})`);
    if (res.headers['content-encoding'] !== undefined) {
      return fail(status, 'compressed_response', 'compressed answers are refused');
    }
    const mediaType = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (mediaType !== 'application/json')
      return fail(status, 'not_json', `answer is not JSON (status ${status})`);
    const declaredHeader = res.headers['content-length'];
    const declared = declaredHeader === undefined ? undefined : Number(declaredHeader);
    if (declared !== undefined && !(Number.isSafeInteger(declared) && declared >= 0)) {
      return fail(status, 'length_mismatch', 'invalid content-length');
    }
    if (declared !== undefined && declared > cap) {
      return fail(status, 'response_too_large', `answer declares ${declared} bytes; the cap is ${cap}`);
    }
    const chunks: Buffer[] = [];
    let received = 0;
    let ended = false;
    res.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > cap) return fail(status, 'response_too_large', `answer is over the ${cap}-byte cap`);
      chunks.push(chunk);
    });
    const short = () => {
      if (ended) return;
      if (declared !== undefined)
        fail(status, 'length_mismatch', `answer ended after ${received} of ${declared} bytes`);
      else fail(status, 'transport_error', 'connection closed mid-answer');
    };
    res.on('aborted', short);
    res.on('error', short);
    res.on('close', short);
    res.on('end', () => {
      ended = true;
      if (declared === undefined || received === declared) readToEnd();
      if (declared !== undefined && received !== declared) {
        return fail(
          status,
          'length_mismatch',
          `answer has ${received} bytes; content-length says ${declared}`,
        );
      }
      const bytes = Buffer.concat(chunks, received);
      if (status === 200) this.serverClock.observe(res.headers.date, sentAtMs);
      if (status === 200 && parse) {
        let value: unknown;
        try {
          value = parse(bytes);
        } catch (error) {
          const why = error instanceof Error ? error.message : String(error);
          return fail(status, 'invalid_response', `answer breaks its contract: ${why}`);
        }
        return succeed(value);
      }
      let body: unknown;
      try {
        body = JSON.parse(bytes.toString('utf8'));
      } catch {
        return fail(status, 'invalid_json', `answer is not valid JSON (status ${status})`);
      }
      if (status !== 200) {
        const e = body as { code?: unknown; message?: unknown; reason?: unknown } | null;
        if (e && typeof e === 'object' && typeof e.code === 'string') {
          return fail(
            status,
            e.code,
            typeof e.message === 'string' ? e.message : e.code,
            typeof e.reason === 'string' ? e.reason : undefined,
            parseRetryAfter(res.headers['retry-after']),
          );
        }
        return fail(status, 'unexpected_status', `unexpected status ${status}`);
      }
      if (body === null || typeof body !== 'object' || Array.isArray(body))
        return fail(status, 'invalid_json', 'answer is not a JSON object');
      succeed(body);
    });
  }
}

/**
 * A request of a v1 session (ADR 0062): the fields newer than v1 left out (a `finalLogs` or
 * `executorHandle` is refused: the caller must not build them in a v1 session), a chunk's text as v1
 * took it.
 */
function v1Body(action: IngressAction, body: unknown): unknown {
  const call = (INGRESS_CALLS as Readonly<Record<string, IngressCall>>)[action];
  if (!call) return body;
  let shaped: unknown;
  try {
    shaped = shapeRequest(call, 1, body);
  } catch (error) {
    throw new IngressCallError(action, 0, 'invalid_request', (error as Error).message);
  }
  if (action !== 'logs' || typeof shaped !== 'object' || shaped === null) return shaped;
  const chunk = shaped as { text?: unknown };
  return typeof chunk.text === 'string' ? { ...chunk, text: v1LogText(chunk.text) } : shaped;
}

/**
 * A 200 answer's reader for a v1 session: the call's own strict reader (or JSON) after the v1 check,
 * which refuses any answer field its call file records as newer than v1 (ADR 0060).
 */
function v1Reader(action: IngressAction, parse: ((bytes: Buffer) => unknown) | undefined) {
  const call = (INGRESS_CALLS as Readonly<Record<string, IngressCall>>)[action];
  return (bytes: Buffer): unknown => {
    const json: unknown = JSON.parse(bytes.toString('utf8'));
    if (call) refuseNewerAnswerFields(call, 1, json);
    return parse ? parse(bytes) : json;
  };
}

/** The body of `action` as bytes, refused here when over the route's limit. */
function payloadOf(action: string, body: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(body ?? null), 'utf8');
  const limit = ingressBodyLimit(action);
  if (payload.length > limit) {
    throw new IngressCallError(
      action,
      0,
      'request_too_large',
      `request body is ${payload.length} bytes; the limit is ${limit}`,
    );
  }
  return payload;
}

function failureParts(failures: readonly { readonly origin: string; readonly error: IngressCallError }[]) {
  return failures.map(({ origin, error }) => ({ origin, code: error.code, reason: error.reason }));
}

function sameParts(a: WorkerTlsCredentials, b: WorkerTlsCredentials): boolean {
  return a.certPem === b.certPem && a.keyPem === b.keyPem && a.caPem === b.caPem;
}

export function credentialFingerprint(c: WorkerTlsCredentials): string {
  const hash = createHash('sha256');
  // Length-prefixed, so moving bytes from one part to the next changes the fingerprint.
  for (const part of [c.certPem, c.keyPem, c.caPem]) {
    const bytes = Buffer.isBuffer(part) ? part : Buffer.from(part, 'utf8');
    const len = Buffer.alloc(8);
    len.writeBigUInt64BE(BigInt(bytes.length));
    hash.update(len).update(bytes);
  }
  return hash.digest('hex');
}

function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : error instanceof Error ? error.name : 'unknown';
}
