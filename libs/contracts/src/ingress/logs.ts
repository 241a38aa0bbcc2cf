/**
 * `logs` (R-RUN-4): one chunk of the attempt's output, in sequence; answered with what became of it.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * ba93662 (2026-12-02); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                                   | appeared           | wire |
 * | ------------------------------------------------------- | ------------------ | ---- |
 * | request: the lease fence, `seq`, `text`                 | ba93662 2026-12-02 | v1   |
 * | request `stream` (optional; stdout, stderr, system: ADR 0032) | d3b71c0 2026-12-04 | v2 |
 * | answer `outcome` (stored, replayed, dropped), `truncated` | c034785 2026-12-01 | v1   |
 */
import {
  LOG_STREAMS,
  LogAppendResult,
  LogStream,
  RUN_LOG_LIMITS,
  ValidationError,
  readEnum,
  readInt,
  readObject,
  readString,
  utf8Length,
} from '@ql/domain';
import { IngressCall, KiB, answerJson, refusing } from './call';
import { LeaseFenceFields, LeaseFenceRequest, buildLeaseFence, readLeaseFence } from './lease-fence';
import { SessionFenceRequest } from './session';

export const LOG_OUTCOMES = [
  'stored',
  'replayed',
  'dropped',
] as const satisfies readonly LogAppendResult['outcome'][];

/** The `logs` answer: what became of the chunk (the store's `LogAppendResult`). */
export type LogsResponse = LogAppendResult;

export const LOGS: IngressCall<'logs'> = {
  action: 'logs',
  bodyLimit: 64 * KiB,
  answerLimit: 1 * KiB,
  firstReleased: 'bb721f9',
  since: { 'request.stream': 2 },
  refusals: [],
};

export interface LogChunkFields {
  readonly seq: number;
  /** Absent from a worker of before ADR 0032 (stored as unknown). */
  readonly stream?: LogStream;
  readonly text: string;
}

export interface LogsRequest extends LeaseFenceRequest, LogChunkFields {}

/**
 * A chunk of output, kept as the task wrote it (ADR 0032): any text but NUL and lone surrogates; the
 * admin views neutralize it on read (`displayLogText`). `stream` is optional (a worker from before
 * ADR 0032 sends none: null); when present it is one of LOG_STREAMS.
 */
export function readLogChunk(
  raw: { seq: unknown; stream?: unknown; text: unknown },
  at = '',
): {
  seq: number;
  stream: LogStream | null;
  text: string;
} {
  const seq = readInt(raw.seq, `${at}seq`, 0, RUN_LOG_LIMITS.maxSeq);
  const stream = raw.stream === undefined ? null : readEnum(raw.stream, `${at}stream`, LOG_STREAMS);
  const text = readString(raw.text, `${at}text`, { max: RUN_LOG_LIMITS.chunkBytes, output: true });
  if (utf8Length(text) > RUN_LOG_LIMITS.chunkBytes) throw new ValidationError(`${at}text`, 'too_long');
  return { seq, stream, text };
}

/** The worker's `logs` body in wire order. */
export function buildLogsRequest(
  fence: SessionFenceRequest,
  fields: LeaseFenceFields & LogChunkFields,
): LogsRequest {
  const lease = buildLeaseFence(fence, fields);
  return fields.stream === undefined
    ? { ...lease, seq: fields.seq, text: fields.text }
    : { ...lease, seq: fields.seq, stream: fields.stream, text: fields.text };
}

/** The control plane's reader of a `logs` body (behind the DTO, ADR 0009): the fence and the chunk. */
export function parseLogsRequest(body: unknown): LeaseFenceRequest & ReturnType<typeof readLogChunk> {
  const fence = readLeaseFence(body, ['seq', 'stream', 'text']);
  const raw = body as Record<string, unknown>;
  return { ...fence, ...readLogChunk({ seq: raw.seq, stream: raw.stream, text: raw.text }) };
}

/** The worker's strict reader of the `logs` answer, from its bytes. */
export function parseLogsAnswer(bytes: string | Buffer): LogsResponse {
  const json = answerJson('logs', bytes, LOGS.answerLimit);
  return refusing('logs', () => {
    const top = readObject(json, '', ['outcome', 'truncated']);
    const outcome = readEnum(top.outcome, 'outcome', LOG_OUTCOMES);
    if (typeof top.truncated !== 'boolean') throw new ValidationError('truncated', 'must_be_boolean');
    return { outcome, truncated: top.truncated };
  });
}
