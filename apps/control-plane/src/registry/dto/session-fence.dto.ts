import { GENERATION_MAX, MAX_CONCURRENT_RUNS, VERSION_MAX } from '@ql/domain';
import { HeartbeatRequest, MAX_RECOVERY_REQUIRED, SessionFenceRequest } from '@ql/contracts';
import { IntField } from '../../http/validation/dto-fields';

/** `drain` and `offline` body: the session fence every session-scoped call carries (R-REG-5). */
export class SessionFenceDto implements SessionFenceRequest {
  @IntField(1, GENERATION_MAX, { description: 'the session generation `register` answered' })
  generation!: number;

  @IntField(0, VERSION_MAX, { description: 'the session version the last answer carried' })
  expectedVersion!: number;
}

/** `heartbeat` body (R-REG-6). */
export class HeartbeatDto extends SessionFenceDto implements HeartbeatRequest {
  @IntField(0, MAX_CONCURRENT_RUNS, {
    description: 'what the worker can take right now; never above its maxConcurrentRuns',
  })
  availableSlots!: number;

  @IntField(0, MAX_RECOVERY_REQUIRED, {
    presence: 'optional',
    description:
      'journal records of the worker waiting for an operator (recovery_required); absent means 0. Shown in the worker view and /metrics',
  })
  recoveryRequired?: number;
}
