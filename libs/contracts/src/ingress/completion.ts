/**
 * `completion` (R-CMP-1): the running attempt ended (with `executorHandle`: a starting one too,
 * ADR 0047), with its last output (ADR 0044); answered `qinglong/remote-run-activation@v1`.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * ba93662 (2026-12-02); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                                     | appeared           | wire |
 * | --------------------------------------------------------- | ------------------ | ---- |
 * | request: the lease fence, `outcome`, `exitCode`, `errorSummary` | ba93662 2026-12-02 | v1   |
 * | request `executorHandle` (optional, ADR 0047)             | 3897bce 2026-12-05 | v2   |
 * | request `finalLogs` (optional, ADR 0044)                  | a2797f2 2026-12-05 | v2   |
 * | answer: see `activation-answer.ts`                        | 7985e66 2026-12-01 | v1   |
 * | answer `snapshot.deadlineGraceMs`                         | f9de650 2026-12-04 | v2   |
 */
import {
  ACTIVATION_LIMITS,
  COMPLETION_OUTCOMES,
  CompletionOutcome,
  FinalLogChunk,
  LOG_STREAMS,
  RUN_LOG_LIMITS,
  StepPayload,
  ValidationError,
  readArray,
  readEnum,
  readInt,
  readObject,
  readString,
  utf8Length,
} from '@ql/domain';
import { KiB } from './call';
import { activationCall } from './activation-call';
import { LeaseFenceFields, LeaseFenceRequest, buildLeaseFence, readLeaseFence } from './lease-fence';
import { readLogChunk } from './logs';
import { readExecutorHandle } from './running';
import { SessionFenceRequest } from './session';

/**
 * What a `completion`'s `finalLogs` may take of its body, as JSON (ADR 0044): one `logs` body. The
 * completion's limit is its own 4 KiB plus this.
 */
export const COMPLETION_FINAL_LOGS_BYTES = 64 * KiB;

export const COMPLETION = activationCall('completion', {
  bodyLimit: 4 * KiB + COMPLETION_FINAL_LOGS_BYTES,
  since: { 'request.executorHandle': 2, 'request.finalLogs': 2 },
});

export interface CompletionFields {
  readonly outcome: CompletionOutcome;
  /** The process exit code; null (or absent) when there was none (killed, never started). */
  readonly exitCode?: number | null;
  /** At most 1 KiB of UTF-8; null (or absent) when there is none. */
  readonly errorSummary?: string | null;
  /** The handle `running` would have carried, from a worker that sent no `running` (ADR 0047). */
  readonly executorHandle?: string;
  /** The attempt's last output (ADR 0044); absent when there is none. */
  readonly finalLogs?: readonly FinalLogChunk[];
}

export interface CompletionRequest extends LeaseFenceRequest, CompletionFields {}

/** Completion fields: a known outcome, an int32 exit code or null, a summary ≤ 1 KiB of UTF-8 without controls. */
export function readCompletion(raw: {
  outcome: unknown;
  exitCode?: unknown;
  errorSummary?: unknown;
}): Extract<StepPayload, { step: 'completion' }> {
  const outcome = readEnum(raw.outcome, 'outcome', COMPLETION_OUTCOMES);
  const exitCode =
    raw.exitCode === undefined || raw.exitCode === null
      ? null
      : readInt(raw.exitCode, 'exitCode', ACTIVATION_LIMITS.exitCodeMin, ACTIVATION_LIMITS.exitCodeMax);
  let errorSummary: string | null = null;
  if (raw.errorSummary !== undefined && raw.errorSummary !== null) {
    errorSummary = readString(raw.errorSummary, 'errorSummary', { max: ACTIVATION_LIMITS.errorSummaryBytes });
    if (utf8Length(errorSummary) > ACTIVATION_LIMITS.errorSummaryBytes)
      throw new ValidationError('errorSummary', 'too_long');
  }
  return { step: 'completion', outcome, exitCode, errorSummary };
}

/**
 * A completion's `finalLogs` (ADR 0044): absent or empty is none; else at most
 * `RUN_LOG_LIMITS.finalChunks` chunks, each under the `logs` chunk's rules with its `stream`, whose
 * texts total at most one chunk's bytes. Their order and seqs are the store's to judge, as for `logs`.
 */
export function readFinalLogs(raw: unknown): FinalLogChunk[] {
  if (raw === undefined) return [];
  const items = readArray(raw, 'finalLogs', RUN_LOG_LIMITS.finalChunks);
  let bytes = 0;
  return items.map((item, i) => {
    const at = `finalLogs[${i}].`;
    const chunk = readObject(item, `finalLogs[${i}]`, ['seq', 'stream', 'text']);
    const stream = readEnum(chunk.stream, `${at}stream`, LOG_STREAMS);
    const { seq, text } = readLogChunk({ seq: chunk.seq, stream, text: chunk.text }, at);
    bytes += utf8Length(text);
    if (bytes > RUN_LOG_LIMITS.chunkBytes) throw new ValidationError('finalLogs', 'too_long');
    return { seq, stream, text };
  });
}

/** The worker's `completion` body in wire order; `executorHandle` and `finalLogs` only when there are some. */
export function buildCompletionRequest(
  fence: SessionFenceRequest,
  fields: LeaseFenceFields & CompletionFields,
): CompletionRequest {
  return {
    ...buildLeaseFence(fence, fields),
    outcome: fields.outcome,
    ...(fields.exitCode === undefined ? {} : { exitCode: fields.exitCode }),
    ...(fields.errorSummary === undefined ? {} : { errorSummary: fields.errorSummary }),
    ...(fields.executorHandle === undefined ? {} : { executorHandle: fields.executorHandle }),
    ...(fields.finalLogs === undefined || fields.finalLogs.length === 0
      ? {}
      : { finalLogs: fields.finalLogs }),
  };
}

/**
 * The control plane's reader of a `completion` body (behind the DTO, ADR 0009): the fence, the
 * ending, the handle when sent, and the final output (none when absent).
 */
export function parseCompletionRequest(body: unknown): LeaseFenceRequest &
  Omit<Extract<StepPayload, { step: 'completion' }>, 'step' | 'finalLogs'> & {
    readonly executorHandle?: string;
    readonly finalLogs: FinalLogChunk[];
  } {
  const fence = readLeaseFence(body, ['outcome', 'exitCode', 'errorSummary', 'executorHandle', 'finalLogs']);
  const raw = body as Record<string, unknown>;
  const { step: _step, ...ending } = readCompletion(raw as Parameters<typeof readCompletion>[0]);
  return {
    ...fence,
    ...ending,
    ...(raw.executorHandle === undefined ? {} : { executorHandle: readExecutorHandle(raw.executorHandle) }),
    finalLogs: readFinalLogs(raw.finalLogs),
  };
}

export { parseActivationResponse as parseCompletionAnswer } from './activation-answer';
