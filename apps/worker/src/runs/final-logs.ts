import { COMPLETION_FINAL_LOGS_BYTES } from '@ql/contracts';
import { RUN_LOG_LIMITS } from '@ql/domain';
import type { FinalLogChunk } from '@ql/domain';
import type { LogText } from './output-text';

/** `{"finalLogs":[]}`: what the field costs a completion body besides its chunks. */
const FIELD_BYTES = Buffer.byteLength(JSON.stringify({ finalLogs: [] }));

/**
 * ADR 0044: where the tail of `queued` that rides on the completion begins, the chunks before it
 * going out as `logs` calls first. The tail is the longest one within the bound the control plane
 * checks — at most `RUN_LOG_LIMITS.finalChunks` chunks whose texts total at most one chunk's bytes —
 * and whose JSON, seqs included, fits the completion's share of its body. `firstSeq` is the seq the
 * first queued chunk goes out with; `queued.length` means nothing rides on the completion.
 */
export function finalTailStart(queued: readonly LogText[], firstSeq: number): number {
  let start = queued.length;
  let textBytes = 0;
  let wireBytes = FIELD_BYTES;
  while (start > 0 && queued.length - start < RUN_LOG_LIMITS.finalChunks) {
    const { stream, text } = queued[start - 1]!;
    const chunk: FinalLogChunk = { seq: firstSeq + start - 1, stream, text };
    textBytes += Buffer.byteLength(text);
    wireBytes += Buffer.byteLength(JSON.stringify(chunk)) + (start === queued.length ? 0 : 1);
    if (textBytes > RUN_LOG_LIMITS.chunkBytes || wireBytes > COMPLETION_FINAL_LOGS_BYTES) break;
    start--;
  }
  return start;
}
