/**
 * ADR 0060 §6: an answer shaped for the wire version of the session it goes to, and the check a v1
 * reader makes of it. A published version never changes: a v1 session gets each call's answer as
 * first released, every field its call file records as newer (`since`) left out.
 */
import { parseTaskSpec, TaskSpec } from '@ql/domain';
import { ContractError, IngressCall, WireVersion, fieldsAfter } from './call';

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
 * The strict reader's check that an answer is of `version` (a v1 reader refuses what v1 did not
 * have): `<field path>:unknown_field` for the first newer field it carries.
 */
export function refuseNewerAnswerFields(call: IngressCall, version: WireVersion, answer: unknown): void {
  for (const path of fieldsAfter(call, version, 'answer'))
    if (carries(answer, path.split('.'))) throw new ContractError(call.action, `${path}:unknown_field`);
}

/** The v2 spec fields a v1 offer cannot drop: they change what runs (secrets, the script files). */
export const V2_RUN_SPEC_FIELDS = ['secretEnv', 'bundle'] as const;

/**
 * The pinned spec as a session of `version` is offered it, with its digest (ADR 0060 §7). For v1 the
 * time zone is left out and the digest is the one of the spec without it (the time zone drives only
 * the control plane's cron, never the run, and the digest only checks the spec as sent; ADR 0056).
 * `undefined`: the spec uses a field v1 cannot carry without changing the run (`secretEnv`, `bundle`).
 */
export function offerSpecFor(
  version: WireVersion,
  spec: TaskSpec,
  digest: string,
): { spec: TaskSpec; digest: string } | undefined {
  if (version >= 2) return { spec, digest };
  if (V2_RUN_SPEC_FIELDS.some((field) => spec[field] !== undefined)) return undefined;
  if (spec.timezone === undefined) return { spec, digest };
  const { timezone: _zone, ...v1 } = spec;
  const canonical = parseTaskSpec(v1);
  // In its canonical form, as a stored spec is sent (sorted keys, every default present).
  return { spec: JSON.parse(canonical.canonical) as TaskSpec, digest: canonical.digest };
}
