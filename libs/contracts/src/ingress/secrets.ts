/**
 * `secrets` (ADR 0050): the holder of a live lease asks, after `starting`, for the values its
 * attempt's revision maps; answered with them by env name, or 422 `secrets_unavailable`.
 *
 * Field history (`git log -S` on the contracts and the worker's reader it came from). Served since
 * 625772b (2026-12-05); first spoken by a worker in 31e2420 (2026-12-05): its v1. (The offer of a
 * task that maps secrets is itself v2: `execution.spec.secretEnv`.)
 *
 * | field                                                          | appeared           | wire |
 * | -------------------------------------------------------------- | ------------------ | ---- |
 * | request: the lease fence                                       | 625772b 2026-12-05 | v1   |
 * | answer `attemptId`, `env`                                      | 625772b 2026-12-05 | v1   |
 * | refusal 409 `worker_lease_fenced` `attempt_not_starting`       | 21941b5 2026-12-05 | v1   |
 * | refusal 422 `secrets_unavailable` (secret_missing, secrets_disabled, key_unknown, key_wrong, secrets_too_large) | 625772b 2026-12-05 | v1 |
 * | refusal 422 `secrets_unavailable` reason `cancel_requested`    | 5fa58eb 2026-12-07 | v2   |
 */
import { ENV_KEY_PATTERN, TaskSpec, ValidationError, readObject, readRecord, readString } from '@ql/domain';
import { ContractError, IngressCall, KiB, answerJson, refusing } from './call';
import { LeaseFenceRequest, buildLeaseFence, parseLeaseFence } from './lease-fence';

export const SECRETS: IngressCall<'secrets'> = {
  action: 'secrets',
  bodyLimit: 4 * KiB,
  // The values are at most 96 KiB (`secrets_too_large` beyond); the answer stays under every cap.
  answerLimit: 128 * KiB,
  firstReleased: '31e2420',
  since: {},
  refusals: [
    { status: 409, code: 'worker_lease_fenced', reason: 'attempt_not_starting', since: 1 },
    { status: 422, code: 'secrets_unavailable', since: 1 },
    { status: 422, code: 'secrets_unavailable', reason: 'cancel_requested', since: 2 },
  ],
};

/** `secrets` carries the lease fence alone (as `starting`). */
export type SecretsRequest = LeaseFenceRequest;
/** The worker's `secrets` body in wire order. */
export const buildSecretsRequest = buildLeaseFence;
/** The control plane's reader of a `secrets` body (behind the DTO, ADR 0009). */
export const parseSecretsRequest = parseLeaseFence;

export interface SecretsResponse {
  readonly attemptId: string;
  /** Env name → value, as the revision maps them; for the child's environment only. */
  readonly env: Readonly<Record<string, string>>;
}

/**
 * The `secrets` answer from its bytes: strict JSON, this attempt's id, and exactly the env names the
 * revision maps, each a non-empty string without NUL. A refusal names the field, never a value: a
 * `ContractError` whose message is the field and rule (`env.ONE: invalid_value`).
 */
export function parseSecretsAnswer(
  bytes: string | Buffer,
  attemptId: string,
  spec: TaskSpec,
): Record<string, string> {
  const json = answerJson('secrets', bytes, SECRETS.answerLimit);
  return refusing(
    'secrets',
    () => {
      const top = readObject(json, '', ['attemptId', 'env']);
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
    },
    (rule, error) => new ContractError('secrets', rule, error.message),
  );
}
