/**
 * ADR 0060 §6: an answer shaped for the wire version of the session it goes to, and the check a v1
 * reader makes of it. A published version never changes: a v1 session gets each call's answer as
 * first released, every field its call file records as newer (`since`) left out.
 */
import { parseTaskSpec, TaskSpec, V2_RUN_SPEC_FIELDS, ValidationError, hasControlCharacter } from '@ql/domain';
import { COMMON_REFUSALS, ContractError, IngressCall, WireVersion, fieldsAfter } from './call';

type Json = Record<string, unknown>;

/** A copy of `value` without the field at `path` (dotted); the same object when it has none. */
function without(value: unknown, path: readonly string[]): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const [head, ...rest] = path;
  if (!(head! in value)) return value;
  const copy: Json = { ...(value as Json) };
  if (rest.length === 0) delete copy[head!];
  else copy[head!] = without(copy[head!], rest);
  return copy;
}

/** Whether `value` carries the field at `path`. */
function carries(value: unknown, path: readonly string[]): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const [head, ...rest] = path;
  if (!(head! in value)) return false;
  return rest.length === 0 || carries((value as Json)[head!], rest);
}

/**
 * `answer` for a session of `version`: every answer field of `call` newer than it left out. The
 * offer's spec fields are not left out here (the spec's digest covers them): see `offerSpecFor`.
 */
export function shapeAnswer<T>(call: IngressCall, version: WireVersion, answer: T): T {
  return fieldsAfter(call, version, 'answer')
    .filter((path) => !path.startsWith('execution.spec.'))
    .reduce<unknown>((shaped, path) => without(shaped, path.split('.')), answer) as T;
}

/**
 * A worker's request for a session of `version` (ADR 0062): every request field of `call` newer than
 * it left out. Only fields that add to a call may be left so (`stream`, `recoveryRequired`, `waitMs`);
 * a worker in a v1 session never builds the ones that change what a call does (`finalLogs`,
 * `executorHandle`: it reports `running` and sends every chunk as `logs`), and they are refused here
 * rather than dropped, so no output is lost to a mistake.
 */
export function shapeRequest<T>(call: IngressCall, version: WireVersion, body: T): T {
  let shaped: unknown = body;
  for (const path of fieldsAfter(call, version, 'request')) {
    if (!carries(shaped, path.split('.'))) continue;
    if (NOT_DROPPED.has(path)) throw new ContractError(call.action, `${path}:not_in_v${version}`);
    shaped = without(shaped, path.split('.'));
  }
  return shaped as T;
}

/** Request fields that change what their call does: never left out of a request, refused instead. */
const NOT_DROPPED = new Set(['finalLogs', 'executorHandle']);

/**
 * Output as a v1 `logs` chunk may carry it: v1 refused controls but tab, line feed and carriage
 * return (ADR 0032 later kept output as written). Each such character becomes `?`, which is never
 * longer in UTF-8, so the chunk stays within its bound.
 */
export function v1LogText(text: string): string {
  // eslint-disable-next-line no-control-regex -- the controls v1 refused are what is replaced
  return text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u2028\u2029]/g, '?');
}

/**
 * The strict reader's check that an answer is of `version` (a v1 reader refuses what v1 did not
 * have): `<field path>:unknown_field` for the first newer field it carries.
 */
export function refuseNewerAnswerFields(call: IngressCall, version: WireVersion, answer: unknown): void {
  for (const path of fieldsAfter(call, version, 'answer'))
    if (carries(answer, path.split('.'))) throw new ContractError(call.action, `${path}:unknown_field`);
}

/**
 * The pinned spec as a session of `version` is offered it, with its digest (ADR 0060 §7, ADR 0062).
 * What drives only the control plane is left out, and the digest is then the one of the spec without
 * it (the digest only checks the spec as sent; ADR 0056): for every version the placement's
 * `workerVersion` and `wireVersion` (never offered: no published version has them), and for v1 the
 * time zone (it drives only the cron). `undefined`: the spec uses a field v1 cannot carry without
 * changing the run (`secretEnv`, `bundle`); placement keeps such runs from v1 sessions.
 */
export function offerSpecFor(
  version: WireVersion,
  spec: TaskSpec,
  digest: string,
): { spec: TaskSpec; digest: string } | undefined {
  if (version < 2 && V2_RUN_SPEC_FIELDS.some((field) => spec[field] !== undefined)) return undefined;
  const { workerVersion, wireVersion, ...offeredRequired } = spec.placement.required;
  const placementOnly = workerVersion !== undefined || wireVersion !== undefined;
  const zoneLeftOut = version < 2 && spec.timezone !== undefined;
  if (!placementOnly && !zoneLeftOut) return { spec, digest };
  const { timezone: _zone, ...withoutZone } = spec;
  const canonical = parseTaskSpec({
    ...(zoneLeftOut ? withoutZone : spec),
    placement: { ...spec.placement, required: offeredRequired },
  });
  // In its canonical form, as a stored spec is sent (sorted keys, every default present).
  return { spec: JSON.parse(canonical.canonical) as TaskSpec, digest: canonical.digest };
}

/** The v1 code a session of v1 gets instead of a refusal code v1 did not have (ADR 0062 §7). */
const V1_CODE_OF: Readonly<Record<string, string>> = {
  // v1 had no revocation: a certificate it cannot use was "no usable client certificate principal".
  certificate_revoked: 'worker_authentication_required',
};

/**
 * A refusal any call may answer, as a session of `version` is given it (ADR 0062 §7): for v1, a code
 * newer than v1 becomes the v1 code of the same status, and a reason newer than v1 (`migrations_pending`)
 * is left out. Refusals of a call's own are v1 or belong to calls v1 does not have.
 */
export function shapeRefusal<T extends { readonly code: string; readonly reason?: string }>(
  version: WireVersion,
  body: T,
): T {
  if (version >= 2) return body;
  const newer = COMMON_REFUSALS.find(
    (r) => r.since > version && r.code === body.code && r.reason === body.reason,
  );
  if (!newer) return body;
  if (newer.reason !== undefined) {
    const { reason: _newer, ...v1 } = body;
    return v1 as T;
  }
  const code = V1_CODE_OF[body.code];
  return code === undefined ? body : { ...body, code };
}

/**
 * A control plane that serves v1 only (`QL_PROTOCOL_MAX=3`, ADR 0062 §8) reads every request as a v1
 * control plane did: a field newer than v1 is `<field>: unknown_field`, and output text holding a
 * control other than tab, LF and CR is `text: control_character` (v1 took no more).
 */
export function refuseNewerRequestFields(call: IngressCall, version: WireVersion, body: unknown): void {
  for (const path of fieldsAfter(call, version, 'request'))
    if (carries(body, path.split('.'))) throw new ValidationError(path, 'unknown_field');
  if (version >= 2 || call.action !== 'logs' || typeof body !== 'object' || body === null) return;
  const text = (body as { text?: unknown }).text;
  if (typeof text === 'string' && hasControlCharacter(text, true))
    throw new ValidationError('text', 'control_character');
}
