import {
  ACTIVATION_LIMITS,
  COMPLETION_OUTCOMES,
  CompletionOutcome,
  ERROR_CODE_PATTERN,
  EXECUTOR_HANDLE_PATTERN,
  LOG_STREAMS,
  LogStream,
  RUN_LOG_LIMITS,
} from '@ql/domain';
import {
  CompletionRequest,
  LogsRequest,
  RunningRequest,
  StartFailureRequest,
  StartingRequest,
} from '@ql/contracts';
import { EnumField, IntField, NestedField, TextField } from '../../http/validation/dto-fields';
import { LeaseFenceDto } from '../../leases/dto/pull.dto';

/** `starting` body (R-ACT-1): the lease fence alone, so it is the renew/release body. */
export class StartingDto extends LeaseFenceDto implements StartingRequest {}

const HANDLE = { max: ACTIVATION_LIMITS.executorHandle, pattern: EXECUTOR_HANDLE_PATTERN };

/** `running` body (R-ACT-1): the fence and the handle the worker runs the attempt under. */
export class RunningDto extends LeaseFenceDto implements RunningRequest {
  @TextField(HANDLE, { description: 'the worker-side handle of the started process (shown to admins)' })
  executorHandle!: string;
}

/** `start-failure` body (R-ACT-2): the fence and why the attempt could not start. */
export class StartFailureDto extends LeaseFenceDto implements StartFailureRequest {
  @TextField({ max: ACTIVATION_LIMITS.errorCode, pattern: ERROR_CODE_PATTERN })
  errorCode!: string;
}

const SEQ_DOC =
  'the chunk number, 0, 1, 2 … per attempt; a gap is refused, the same seq, stream and text is a replay';
const TEXT_DOC = `at most ${RUN_LOG_LIMITS.chunkBytes / 1024} KiB of UTF-8, as the task wrote it: any character but NUL (and no lone surrogate); the admin views neutralize what a terminal or browser would interpret`;
const textField = () =>
  TextField({ max: RUN_LOG_LIMITS.chunkBytes, output: true }, { description: TEXT_DOC });

/** One chunk of a completion's `finalLogs` (ADR 0044): a `logs` chunk that always says its stream. */
export class FinalLogChunkDto {
  @IntField(0, RUN_LOG_LIMITS.maxSeq, { description: SEQ_DOC })
  seq!: number;

  @EnumField(LOG_STREAMS, {
    description: 'the task’s `stdout` or `stderr`, or `system` for the worker’s truncation marker',
  })
  stream!: LogStream;

  @textField()
  text!: string;
}

/** `logs` body (R-RUN-4): one chunk of output, in sequence per attempt. */
export class LogChunkDto extends LeaseFenceDto implements LogsRequest {
  @IntField(0, RUN_LOG_LIMITS.maxSeq, { description: SEQ_DOC })
  seq!: number;

  @EnumField(LOG_STREAMS, {
    presence: 'optional',
    description:
      'where the text came from: the task’s `stdout` or `stderr`, or `system` for the worker’s truncation marker; a worker from before ADR 0032 sends none (stored as unknown)',
  })
  stream?: LogStream;

  @textField()
  text!: string;
}

/** `completion` body (R-CMP-1): the fence and the attempt's end. */
export class CompletionDto extends LeaseFenceDto implements CompletionRequest {
  @EnumField(COMPLETION_OUTCOMES)
  outcome!: CompletionOutcome;

  @IntField(ACTIVATION_LIMITS.exitCodeMin, ACTIVATION_LIMITS.exitCodeMax, {
    presence: 'nullable',
    description: 'the process exit code; null or absent when there was none (killed, never started)',
  })
  exitCode?: number | null;

  @TextField(
    { max: ACTIVATION_LIMITS.errorSummaryBytes },
    { presence: 'nullable', description: `at most ${ACTIVATION_LIMITS.errorSummaryBytes} bytes of UTF-8` },
  )
  errorSummary?: string | null;

  @TextField(HANDLE, {
    presence: 'optional',
    description:
      'the handle `running` would have carried, from a worker that sent no `running` (its process ended first, ADR 0047): then the attempt may still be `starting`, and `running` and the completion are applied together, as if both had come; absent, the attempt must be `running`',
  })
  executorHandle?: string;

  @NestedField(() => FinalLogChunkDto, {
    maxItems: RUN_LOG_LIMITS.finalChunks,
    presence: 'optional',
    description: `the attempt’s last output, stored as \`logs\` chunks would be and in the completion’s transaction, before its state change (ADR 0044): at most ${RUN_LOG_LIMITS.finalChunks} chunks whose texts total at most ${RUN_LOG_LIMITS.chunkBytes / 1024} KiB of UTF-8; a refused completion stores none of them, and only the identical body replays`,
  })
  finalLogs?: FinalLogChunkDto[];
}
