import {
  CRON_MAX_LENGTH,
  ENV_KEY_PATTERN,
  SECRET_LIMITS,
  TASK_EXECUTORS,
  TASK_LIMITS,
  TASK_NAME_RULES,
  TASK_RUNTIMES,
  TIMEZONE_MAX_LENGTH,
  TIMEZONE_PATTERN,
} from '@ql/domain';
import { EnumField, IntField, NestedField, TextField, TextMapField } from '../../http/validation/dto-fields';
import { PlacementSpecDto } from '../../placement/dto/placement-spec.dto';
import { TaskBundleDto } from '../../bundles/dto/bundle.dto';

/**
 * A task body (create and update) and the spec of a revision (R-RUN-1): its shape. Byte sizes in
 * UTF-8, cron syntax, `maxBackoffMs ≥ initialBackoffMs` and the canonical form are the domain's
 * (parseTaskSpec).
 */
export class RetryPolicyDto {
  @IntField(TASK_LIMITS.minAttempts, TASK_LIMITS.maxAttempts, {
    description: 'attempts in all, the first included',
  })
  maxAttempts!: number;

  @IntField(TASK_LIMITS.minBackoffMs, TASK_LIMITS.maxBackoffMs)
  initialBackoffMs!: number;

  @IntField(1, TASK_LIMITS.maxMultiplier, {
    presence: 'optional',
    default: 2,
    description: 'backoff of attempt n is initial × multiplier^(n-2), capped at maxBackoffMs',
  })
  multiplier?: number;

  @IntField(TASK_LIMITS.minBackoffMs, TASK_LIMITS.maxBackoffMs, {
    presence: 'optional',
    description: 'at least initialBackoffMs',
  })
  maxBackoffMs?: number;
}

export class TaskSpecDto {
  @TextField(TASK_NAME_RULES, {
    description: `any printable Unicode (京东签到), normalized to NFC; at most ${TASK_LIMITS.nameLength} characters and ${TASK_LIMITS.nameBytes} bytes of UTF-8; control, format (bidi, zero-width) and private-use characters and a space at either end are refused`,
  })
  name!: string;

  @TextField(
    { max: TASK_LIMITS.commandBytes, multiline: true },
    {
      description: `at most ${TASK_LIMITS.commandBytes / 1024} KiB of UTF-8; tab, LF and CR are the only control characters`,
    },
  )
  command!: string;

  @EnumField(TASK_RUNTIMES)
  runtime!: string;

  @EnumField(TASK_EXECUTORS, { presence: 'optional', default: TASK_EXECUTORS[0] })
  executor?: string;

  @NestedField(() => PlacementSpecDto, { presence: 'optional' })
  placement?: PlacementSpecDto;

  @IntField(TASK_LIMITS.minTimeoutMs, TASK_LIMITS.maxTimeoutMs, {
    presence: 'optional',
    default: TASK_LIMITS.defaultTimeoutMs,
  })
  timeoutMs?: number;

  @NestedField(() => RetryPolicyDto, { presence: 'nullable', description: 'null: no retry' })
  retry?: RetryPolicyDto | null;

  @TextMapField(
    {
      maxEntries: TASK_LIMITS.envEntries,
      key: { max: TASK_LIMITS.envKeyLength, pattern: ENV_KEY_PATTERN },
      value: { max: TASK_LIMITS.envValueBytes, min: 0 },
    },
    { presence: 'nullable', description: `non-secret; at most ${TASK_LIMITS.envBytes / 1024} KiB in all` },
  )
  env?: Record<string, string> | null;

  @TextMapField(
    {
      maxEntries: SECRET_LIMITS.mappedEnvEntries,
      key: { max: TASK_LIMITS.envKeyLength, pattern: ENV_KEY_PATTERN },
      value: { max: SECRET_LIMITS.secretsPerEnv * (SECRET_LIMITS.nameLength + 1), multiline: true },
    },
    {
      presence: 'nullable',
      description:
        'env names the command gets from secrets (ADR 0050): a secret name, or several joined by `&` or a line feed, the values then joined the same way (QingLong’s `JD_COOKIE`); every name must exist; absent when empty; never also in `env`',
      example: { JD_COOKIE: 'jd-cookie-1&jd-cookie-2' },
    },
  )
  secretEnv?: Record<string, string> | null;

  // Tabs may separate the fields, hence multi-line text; the cron syntax is the domain's.
  @TextField(
    { max: CRON_MAX_LENGTH, multiline: true },
    {
      presence: 'nullable',
      description:
        'five fields (minute hour day-of-month month day-of-week) or six with seconds first (second minute …); ' +
        'numbers, *, a-b, /n, lists, JAN-DEC and SUN-SAT in any case, ? for a whole day field; ' +
        'wall-clock times in `timezone`; six-field times at least 10 s apart',
      example: '0 0 8 * * MON-FRI',
    },
  )
  cron?: string | null;

  @TextField(
    { max: TIMEZONE_MAX_LENGTH, pattern: TIMEZONE_PATTERN },
    {
      presence: 'nullable',
      default: 'UTC',
      description:
        'IANA time zone of the cron (only with a cron; UTC when absent or null, and then left out of the spec). ' +
        'A time the clock skips fires at the jump; a time it shows twice fires once, the first time',
      example: 'Asia/Shanghai',
    },
  )
  timezone?: string | null;

  @IntField(0, TASK_LIMITS.maxPriority, { presence: 'optional', default: 0 })
  priority?: number;

  @NestedField(() => TaskBundleDto, {
    presence: 'nullable',
    description:
      'the script bundle the command runs in, and the folder inside it (ADR 0051); null or absent: none',
  })
  bundle?: TaskBundleDto | null;
}
