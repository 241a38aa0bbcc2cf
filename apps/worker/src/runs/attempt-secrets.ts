import { ExecutionOffer, parseStrictJson } from '@ql/contracts';
import { IngressCallError } from '../ingress-client/worker-ingress-https.client';
import { HeldLease, LeaseChannel, TermOptions, callInTerm } from './lease-channel';
import {
  ENV_KEY_PATTERN,
  TaskSpec,
  ValidationError,
  readObject,
  readRecord,
  readString,
  secretNamesOfMapping,
} from '@ql/domain';

/**
 * The `secrets` answer (ADR 0050) from its bytes: strict JSON, this attempt's id, and exactly the env
 * names the revision maps, each a string. A refusal names the field, never a value.
 */
export function readSecretsAnswer(bytes: Buffer, attemptId: string, spec: TaskSpec): Record<string, string> {
  const top = readObject(parseStrictJson(bytes), '', ['attemptId', 'env']);
  if (top.attemptId !== attemptId) throw new ValidationError('attemptId', 'other_attempt');
  const env = readRecord(top.env, 'env');
  const wanted = Object.keys(spec.secretEnv ?? {}).sort();
  const got = Object.keys(env).sort();
  if (wanted.join('\n') !== got.join('\n')) throw new ValidationError('env', 'not_the_mapped_names');
  const out: Record<string, string> = {};
  for (const key of got) {
    readString(key, 'env.<key>', { max: 128, pattern: ENV_KEY_PATTERN });
    if (typeof env[key] !== 'string' || env[key].length === 0 || env[key].includes('\u0000'))
      throw new ValidationError(`env.${key}`, 'invalid_value');
    out[key] = env[key];
  }
  return out;
}

/**
 * What the worker redacts from the attempt's output (issue 19 item 7): every delivered value and,
 * where a mapping joins several secrets, each of them (the value split by the mapping's separator,
 * when it gives one part per secret).
 */
export function secretValuesToRedact(spec: TaskSpec, env: Readonly<Record<string, string>>): string[] {
  const values: string[] = [];
  for (const [key, mapping] of Object.entries(spec.secretEnv ?? {})) {
    const value = env[key];
    if (value === undefined) continue;
    values.push(value);
    const { names, separator } = secretNamesOfMapping(mapping);
    const parts = value.split(separator);
    if (names.length > 1 && parts.length === names.length) values.push(...parts);
  }
  return values;
}

/**
 * The `secrets` call (ADR 0050) after `starting`, fenced as every lease call, its answer read strictly:
 * `{env}` the offer's revision maps (empty, without a call, when it maps none), or, when the control
 * plane answers 422 `secrets_unavailable`, the start failure to report: `cancel_requested` when the run
 * is being cancelled, else `secrets_unavailable` (a mapped secret is gone or cannot be decrypted).
 */
export async function fetchSecrets(
  channel: LeaseChannel,
  lease: HeldLease,
  term: TermOptions,
  offer: ExecutionOffer,
): Promise<{ env: Record<string, string> } | { refused: 'cancel_requested' | 'secrets_unavailable' }> {
  const spec = offer.execution.spec;
  if (Object.keys(spec.secretEnv ?? {}).length === 0) return { env: {} };
  try {
    const env = (await callInTerm(
      channel,
      'secrets',
      lease,
      {},
      {
        ...term,
        parse: (bytes) => readSecretsAnswer(bytes, offer.run.attemptId, spec),
      },
    )) as Record<string, string>;
    return { env };
  } catch (error) {
    if (error instanceof IngressCallError && error.status === 422 && error.code === 'secrets_unavailable')
      return { refused: error.reason === 'cancel_requested' ? 'cancel_requested' : 'secrets_unavailable' };
    throw error;
  }
}
