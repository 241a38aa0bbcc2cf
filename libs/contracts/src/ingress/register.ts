/**
 * `register` (R-REG-2, R-REG-3): a worker opens a session, declaring its capabilities, capacity,
 * software and protocol versions; answered with the session and how it came to be.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from):
 *
 * | field                                                   | appeared          | wire |
 * | ------------------------------------------------------- | ----------------- | ---- |
 * | request `capabilities` (all its members)                | e7d9752 2026-12-01 | v1   |
 * | request `maxConcurrentRuns`, `availableSlots`            | e7d9752 2026-12-01 | v1   |
 * | request `softwareVersion`, `protocolVersion` (3 only)    | e7d9752 2026-12-01 | v1   |
 * | answer: the session projection and `outcome`            | e7d9752 2026-12-01 | v1   |
 * | refusal 409 `certificate_superseded` (ADR 0045 §4)      | aeb2d42 2026-12-05 | v2   |
 * | request `protocolVersion` 4 (v2), refusal 400 `protocol_unsupported` (ADR 0060) | issue 30 | v2 |
 */
import validSemver from 'semver/functions/valid';
import {
  MAX_CONCURRENT_RUNS,
  RegistrationSnapshot,
  WorkerSession,
  ValidationError,
  canonicalJson,
  canonicalizeCapabilities,
  readInt,
  readObject,
  readString,
  sha256Hex,
} from '@ql/domain';
import { ContractError, IngressCall, KiB, PROTOCOL_VERSION_OF_WIRE, WIRE_VERSIONS, answerJson } from './call';
import {
  RegisterResponse,
  SESSION_ANSWER_MAX_BYTES,
  SessionExpectation,
  buildSessionResponse,
  readSessionAnswer,
} from './session';

/**
 * The protocol versions this control plane accepts at registration, lowest first: one per wire
 * version it serves (3 is v1, 4 is v2: PROTOCOL_VERSION_OF_WIRE). A worker registers the highest it
 * speaks and steps down on a refusal (ADR 0060 §1).
 */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly number[] = WIRE_VERSIONS.map(
  (v) => PROTOCOL_VERSION_OF_WIRE[v],
);
/** The range as operators read it: `3..4`. */
export const SUPPORTED_PROTOCOL_RANGE = rangeOf(SUPPORTED_PROTOCOL_VERSIONS);

/**
 * A `protocolVersion` this control plane does not serve: 400 `protocol_unsupported` (ADR 0060), its
 * message naming the version offered and the range served. A validation error (nothing was written)
 * that the ingress renders with its own code, not `invalid_worker_request`.
 */
export class ProtocolUnsupportedError extends ValidationError {
  constructor(
    readonly offered: number,
    readonly served: readonly number[],
  ) {
    super(
      'protocolVersion',
      'unsupported',
      `protocol_unsupported: the worker offered protocol version ${offered} (a worker offers the highest it speaks, then the next lower); this control plane serves ${rangeOf(served)} (3: wire v1, 4: wire v2)`,
    );
  }
}

/** `3..4`, or `4` for one version. */
export function rangeOf(versions: readonly number[]): string {
  const low = versions[0];
  const high = versions[versions.length - 1];
  return low === high ? `${low}` : `${low}..${high}`;
}
/** The range a protocol version is read in before it is checked against the supported ones. */
export const PROTOCOL_VERSION_MAX = 1000;
export const SOFTWARE_VERSION_MAX_LENGTH = 64;

export const REGISTER: IngressCall<'register'> = {
  action: 'register',
  bodyLimit: 20 * KiB,
  answerLimit: SESSION_ANSWER_MAX_BYTES,
  firstReleased: 'e7d9752',
  since: {},
  refusals: [
    { status: 409, code: 'certificate_superseded', since: 2 },
    { status: 400, code: 'protocol_unsupported', since: 2 },
  ],
};

/** A runtime the worker can start (`node`, `python`) and its version. */
export interface RuntimeCapabilityRequest {
  readonly name: string;
  readonly version: string;
}
export interface GpuCapabilityRequest {
  readonly vendor: string;
  readonly model: string;
  readonly memoryMiB: number;
  readonly features?: readonly string[] | null;
}
/** Capabilities as sent: sets in any order (the control plane canonicalizes), optional ones nullable. */
export interface CapabilitiesRequest {
  readonly architecture: string;
  readonly operatingSystem: string;
  readonly executors: readonly string[];
  readonly runtimes: readonly RuntimeCapabilityRequest[];
  readonly labels?: Readonly<Record<string, string>> | null;
  readonly memoryMiB: number;
  readonly diskMiB: number;
  readonly gpus?: readonly GpuCapabilityRequest[] | null;
  readonly features?: readonly string[] | null;
}

export interface RegisterRequest {
  readonly capabilities: CapabilitiesRequest;
  readonly maxConcurrentRuns: number;
  readonly availableSlots: number;
  readonly softwareVersion: string;
  readonly protocolVersion: number;
}

/**
 * The worker's `register` body, in wire order, checked by the control plane's own reader first, so
 * a local mistake fails here, clearly (a ValidationError naming the field).
 */
export function buildRegisterRequest(fields: RegisterRequest): RegisterRequest {
  const body: RegisterRequest = {
    capabilities: fields.capabilities,
    maxConcurrentRuns: fields.maxConcurrentRuns,
    availableSlots: fields.availableSlots,
    softwareVersion: fields.softwareVersion,
    protocolVersion: fields.protocolVersion,
  };
  parseRegistration(body);
  return body;
}

/**
 * The control plane's reader of a `register` body (behind the DTO, ADR 0009): the semantic rules.
 * `served`: the protocol versions it accepts (a control plane may serve fewer, `QL_PROTOCOL_MIN`).
 */
export function parseRegistration(
  body: unknown,
  served: readonly number[] = SUPPORTED_PROTOCOL_VERSIONS,
): RegistrationSnapshot {
  const raw = readObject(body, '', [
    'capabilities',
    'maxConcurrentRuns',
    'availableSlots',
    'softwareVersion',
    'protocolVersion',
  ]);
  const capabilities = canonicalizeCapabilities(raw.capabilities);
  const maxConcurrentRuns = readInt(raw.maxConcurrentRuns, 'maxConcurrentRuns', 1, MAX_CONCURRENT_RUNS);
  const availableSlots = readInt(raw.availableSlots, 'availableSlots', 0, maxConcurrentRuns);
  const softwareVersion = readString(raw.softwareVersion, 'softwareVersion', {
    max: SOFTWARE_VERSION_MAX_LENGTH,
  });
  if (validSemver(softwareVersion) !== softwareVersion)
    throw new ValidationError('softwareVersion', 'invalid_semver');
  const protocolVersion = readInt(raw.protocolVersion, 'protocolVersion', 1, PROTOCOL_VERSION_MAX);
  if (!served.includes(protocolVersion)) throw new ProtocolUnsupportedError(protocolVersion, served);
  const digest = sha256Hex(
    canonicalJson({
      capabilitiesDigest: capabilities.digest,
      maxConcurrentRuns,
      availableSlots,
      softwareVersion,
      protocolVersion,
    }),
  );
  return { capabilities, maxConcurrentRuns, availableSlots, softwareVersion, protocolVersion, digest };
}

/** The control plane's `register` answer: how the session came to be, then the session. */
export function buildRegisterResponse(
  outcome: RegisterResponse['outcome'],
  session: WorkerSession,
): RegisterResponse {
  return { outcome, ...buildSessionResponse(session) };
}

/** The worker's strict reader of the `register` answer: the session projection and `outcome`. */
export function parseRegisterAnswer(bytes: string | Buffer, expect?: SessionExpectation): RegisterResponse {
  const json = answerJson('register', bytes, REGISTER.answerLimit);
  const answer = readSessionAnswer('register', json, expect, ['outcome']);
  if (answer.outcome === undefined) throw new ContractError('register', 'outcome:required');
  return answer as RegisterResponse;
}
