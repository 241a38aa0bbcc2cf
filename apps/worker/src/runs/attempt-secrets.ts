import { ExecutionOffer, parseSecretsAnswer } from '@ql/contracts';
import { IngressCallError } from '../ingress-client/worker-ingress-https.client';
import { HeldLease, LeaseChannel, TermOptions, callInTerm } from './lease-channel';
import { TaskSpec, secretNamesOfMapping } from '@ql/domain';

/**
 * The `secrets` answer (ADR 0050) from its bytes, by the contract's strict reader (ingress/secrets.ts):
 * strict JSON, this attempt's id, exactly the env names the revision maps. A refusal names the field,
 * never a value.
 */
export function readSecretsAnswer(bytes: Buffer, attemptId: string, spec: TaskSpec): Record<string, string> {
  return parseSecretsAnswer(bytes, attemptId, spec);
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
