/**
 * What every ingress call file (`ingress/<call>.ts`, ADR 0056) is made of: the call's descriptor
 * (action, limits, schema name and version, the fields and refusals newer than v1) and the one
 * stable error its answer parser throws.
 */
import { ValidationError, WireVersion } from '@ql/domain';

// The versions themselves are the domain's (placement reads them too): re-exported for the call files.
export { PROTOCOL_VERSION_OF_WIRE, WIRE_VERSIONS, wireVersionOf } from '@ql/domain';
export type { WireVersion } from '@ql/domain';
import { parseStrictJson } from '../strict-json';

export const KiB = 1024;

/** What this repository's control plane and worker speak today: v1 and all that came after it. */
export const CURRENT_WIRE_VERSION: WireVersion = 2;

/** A refusal a call may answer: its status, code and (when it says one) reason. */
export interface Refusal {
  readonly status: number;
  readonly code: string;
  readonly reason?: string;
  /** The wire version the refusal belongs to (1: answered since the call was first released). */
  readonly since: WireVersion;
}

/** One ingress call's contract, besides its types and functions. */
export interface IngressCall<A extends string = string> {
  /** The path segment (`…/sessions/{sessionId}/<action>`), or `enroll`/`certificate`. */
  readonly action: A;
  /** Request bytes the control plane reads (before parsing) and the worker refuses to send. */
  readonly bodyLimit: number;
  /** Answer bytes the answer's parser accepts. */
  readonly answerLimit: number;
  /** The answer's versioned schema name, where its body carries one. */
  readonly schema?: string;
  /** The commit where both sides first spoke the call: what its first version is. */
  readonly firstReleased: string;
  /**
   * Fields that are not v1, with the version they belong to: `request.<path>` or `answer.<path>`
   * (a JSON path). A field absent here is v1. The comment table of each call file gives the commits.
   */
  readonly since: Readonly<Record<string, WireVersion>>;
  /** Refusals this call answers besides the ones every call may (`COMMON_REFUSALS`). */
  readonly refusals: readonly Refusal[];
}

/**
 * Refusals any call may answer (ADR 0007, ADR 0045): identity, limits, availability. The newer ones
 * belong to v2: 401 `certificate_revoked` from the identity guard (ADR 0055, fbf0d39 2026-12-07) and
 * the 503 reason `migrations_pending` (fffb75d 2026-12-07).
 */
export const COMMON_REFUSALS: readonly Refusal[] = [
  { status: 400, code: 'invalid_worker_request', since: 1 },
  { status: 401, code: 'worker_authentication_required', since: 1 },
  { status: 401, code: 'certificate_revoked', since: 2 },
  { status: 404, code: 'worker_route_not_found', since: 1 },
  { status: 413, code: 'worker_request_too_large', since: 1 },
  { status: 429, code: 'worker_rate_limited', since: 1 },
  { status: 503, code: 'worker_ingress_unavailable', since: 1 },
  { status: 503, code: 'worker_ingress_unavailable', reason: 'migrations_pending', since: 2 },
];

/**
 * The fields of `call`'s request or answer that are not in `version` (JSON paths): what a body or
 * an answer for a session of that version must not carry.
 */
export function fieldsAfter(call: IngressCall, version: WireVersion, side: 'request' | 'answer'): string[] {
  const prefix = `${side}.`;
  return Object.entries(call.since)
    .filter(([path, since]) => since > version && path.startsWith(prefix))
    .map(([path]) => path.slice(prefix.length));
}

/**
 * An answer that breaks its call's contract: the stable `rule` is `<field path>:<rule>` (or a
 * whole-answer rule: `too_large`, `invalid_json`). The worker treats it as a failed call.
 */
export class ContractError extends Error {
  constructor(
    /** The call whose answer it is. */
    readonly call: string,
    readonly rule: string,
    message?: string,
  ) {
    super(message ?? `${call} answer: ${rule}`);
    this.name = new.target.name;
  }
}

/** Runs a reader, turning the domain's ValidationError into the call's ContractError. */
export function refusing<T>(
  call: string,
  read: () => T,
  make: (rule: string, error: ValidationError) => ContractError = (rule) => new ContractError(call, rule),
): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof ValidationError) throw make(`${error.field}:${error.rule}`, error);
    throw error;
  }
}

/** An answer's bytes as strict JSON (R-WIRE-2), refused over `limit` bytes. */
export function answerJson(call: string, bytes: string | Buffer, limit: number): unknown {
  const buffer = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
  if (buffer.length > limit) throw new ContractError(call, 'too_large');
  try {
    return parseStrictJson(buffer);
  } catch (error) {
    if (error instanceof ValidationError && error.field !== 'body')
      throw new ContractError(call, `${error.field}:${error.rule}`);
    throw new ContractError(call, 'invalid_json');
  }
}
