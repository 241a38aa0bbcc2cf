import {
  AcknowledgementState,
  ActivationStep,
  completionStatus,
  deadlinePassed,
  decideAcknowledgement,
  decideRunAfterAttempt,
  retrySchedule,
  runningDigest,
  startFailureStatus,
  stepDigest,
} from './activation';
import { decideLogChunk } from './run-logs';

const NONE = { starting: null, running: null, final: null };
const D = 'digest-a';
const state = (
  attemptStatus: AcknowledgementState['attemptStatus'],
  recorded: Partial<AcknowledgementState['recorded']> = {},
  leaseFault: AcknowledgementState['leaseFault'] = null,
): AcknowledgementState => ({ attemptStatus, recorded: { ...NONE, ...recorded }, leaseFault });

describe('decideAcknowledgement (R-ACT-1..2, R-CMP-1)', () => {
  it.each<[string, ActivationStep, AcknowledgementState, ReturnType<typeof decideAcknowledgement>]>([
    ['starting on a claimed attempt', 'starting', state('claimed'), { kind: 'apply' }],
    ['running after starting', 'running', state('starting', { starting: 'x' }), { kind: 'apply' }],
    [
      'start failure after starting',
      'start_failure',
      state('starting', { starting: 'x' }),
      { kind: 'apply' },
    ],
    [
      'completion of a running attempt',
      'completion',
      state('running', { starting: 'x', running: 'y' }),
      { kind: 'apply' },
    ],
    [
      'running without starting',
      'running',
      state('claimed'),
      { kind: 'refuse', reason: 'attempt_not_starting' },
    ],
    [
      'start failure of a claimed attempt',
      'start_failure',
      state('claimed'),
      { kind: 'refuse', reason: 'attempt_not_starting' },
    ],
    [
      'start failure once running',
      'start_failure',
      state('running', { starting: 'x', running: 'y' }),
      { kind: 'refuse', reason: 'attempt_not_starting' },
    ],
    [
      'completion while starting',
      'completion',
      state('starting', { starting: 'x' }),
      { kind: 'refuse', reason: 'attempt_not_running' },
    ],
    [
      'starting replayed',
      'starting',
      state('starting', { starting: D }),
      { kind: 'replay', status: 'already_starting' },
    ],
    [
      'starting replayed once running',
      'starting',
      state('running', { starting: D, running: 'y' }),
      { kind: 'replay', status: 'already_running' },
    ],
    [
      'running replayed',
      'running',
      state('running', { starting: 'x', running: D }),
      { kind: 'replay', status: 'already_running' },
    ],
    [
      'completion replayed',
      'completion',
      state('succeeded', { starting: 'x', running: 'y', final: D }),
      { kind: 'replay', status: 'already_terminal' },
    ],
    [
      'replay wins over an ended lease',
      'completion',
      state('failed', { final: D }, 'lease_not_active'),
      { kind: 'replay', status: 'already_terminal' },
    ],
    [
      'running with another handle',
      'running',
      state('running', { starting: 'x', running: 'y' }),
      { kind: 'refuse', reason: 'acknowledgement_mismatch' },
    ],
    [
      'another outcome',
      'completion',
      state('succeeded', { final: 'other' }),
      { kind: 'refuse', reason: 'acknowledgement_mismatch' },
    ],
    [
      'completion after a start failure',
      'completion',
      state('failed', { starting: 'x', final: 'sf' }),
      { kind: 'refuse', reason: 'acknowledgement_mismatch' },
    ],
    [
      'running after the worker ended it',
      'running',
      state('failed', { starting: 'x', final: 'sf' }),
      { kind: 'refuse', reason: 'attempt_finished' },
    ],
    [
      'completion after the sweeper timed it out',
      'completion',
      state('timed_out', { starting: 'x', running: 'y' }, 'lease_not_active'),
      { kind: 'late' },
    ],
    [
      'running after it was lost',
      'running',
      state('lost', { starting: 'x' }, 'lease_not_active'),
      { kind: 'late' },
    ],
    ['starting after a cancel', 'starting', state('cancelled', {}, 'lease_not_active'), { kind: 'late' }],
    [
      'starting on an expired lease',
      'starting',
      state('claimed', {}, 'lease_expired'),
      { kind: 'refuse', reason: 'lease_expired' },
    ],
    [
      'running with a stale lease version',
      'running',
      state('starting', { starting: 'x' }, 'lease_version_mismatch'),
      { kind: 'refuse', reason: 'lease_version_mismatch' },
    ],
  ])('%s', (_name, step, input, expected) => {
    expect(decideAcknowledgement(step, D, input)).toEqual(expected);
  });
});

describe('decideAcknowledgement: a completion that carries executorHandle (ADR 0047)', () => {
  const R = 'running-of-the-handle';
  it.each<[string, AcknowledgementState, ReturnType<typeof decideAcknowledgement>]>([
    [
      'on a starting attempt: running and completion',
      state('starting', { starting: 'x' }),
      { kind: 'apply', withRunning: true },
    ],
    [
      'once that same running is recorded: a completion',
      state('running', { starting: 'x', running: R }),
      { kind: 'apply' },
    ],
    [
      'after a running with another handle',
      state('running', { starting: 'x', running: 'y' }),
      { kind: 'refuse', reason: 'acknowledgement_mismatch' },
    ],
    [
      'on a claimed attempt (as running)',
      state('claimed'),
      { kind: 'refuse', reason: 'attempt_not_starting' },
    ],
    [
      'replayed once applied',
      state('succeeded', { starting: 'x', running: R, final: D }),
      { kind: 'replay', status: 'already_terminal' },
    ],
    [
      'another completion once applied',
      state('succeeded', { starting: 'x', running: R, final: 'other' }),
      { kind: 'refuse', reason: 'acknowledgement_mismatch' },
    ],
    [
      'on a stale lease',
      state('starting', { starting: 'x' }, 'lease_version_mismatch'),
      { kind: 'refuse', reason: 'lease_version_mismatch' },
    ],
    [
      'after the sweeper ended it',
      state('timed_out', { starting: 'x' }, 'lease_not_active'),
      { kind: 'late' },
    ],
  ])('%s', (_name, input, expected) => {
    expect(decideAcknowledgement('completion', D, input, R)).toEqual(expected);
  });

  it('a later running with that handle is the replay of the step the completion stood in for', () => {
    const done = state('succeeded', { starting: 'x', running: runningDigest('pid:7'), final: D });
    expect(decideAcknowledgement('running', runningDigest('pid:7'), done)).toEqual({
      kind: 'replay',
      status: 'already_terminal',
    });
    expect(decideAcknowledgement('running', runningDigest('pid:8'), done)).toEqual({
      kind: 'refuse',
      reason: 'acknowledgement_mismatch',
    });
  });

  it('without the handle the digest is the one it always had', () => {
    const ending = { step: 'completion', outcome: 'succeeded', exitCode: 0, errorSummary: null } as const;
    expect(stepDigest({ ...ending, executorHandle: undefined })).toBe(stepDigest(ending));
    expect(stepDigest({ ...ending, executorHandle: 'pid:7' })).not.toBe(stepDigest(ending));
  });
});

describe('attempt and run endings', () => {
  it.each([
    [false, false, 'failed'],
    [true, false, 'cancelled'],
    [false, true, 'timed_out'],
    [true, true, 'cancelled'],
  ] as const)('start failure, cancel=%s, deadline passed=%s → %s', (cancelRequested, passed, status) => {
    expect(startFailureStatus({ cancelRequested, deadlinePassed: passed })).toBe(status);
  });

  it.each([
    ['succeeded', false, 'succeeded'],
    ['succeeded', true, 'cancelled'],
    ['failed', true, 'cancelled'],
    ['timed_out', false, 'timed_out'],
    ['cancelled', false, 'cancelled'],
  ] as const)('completion %s, cancel=%s → %s', (outcome, cancel, status) => {
    expect(completionStatus(outcome, cancel)).toBe(status);
  });

  const retry = retrySchedule({
    maxAttempts: 3,
    initialBackoffMs: 1_000,
    multiplier: 2,
    maxBackoffMs: 60_000,
  });
  it.each([
    ['succeeded', false, 1, retry, { kind: 'finish', runStatus: 'succeeded' }],
    ['succeeded', true, 1, retry, { kind: 'finish', runStatus: 'cancelled' }],
    ['cancelled', false, 1, retry, { kind: 'finish', runStatus: 'cancelled' }],
    ['failed', false, 1, retry, { kind: 'retry', backoffMs: 1_000 }],
    ['failed', false, 2, retry, { kind: 'retry', backoffMs: 2_000 }],
    ['failed', false, 3, retry, { kind: 'finish', runStatus: 'failed' }],
    ['failed', false, 1, null, { kind: 'finish', runStatus: 'failed' }],
    ['timed_out', false, 1, retry, { kind: 'retry', backoffMs: 1_000 }],
    ['timed_out', false, 1, null, { kind: 'finish', runStatus: 'timed_out' }],
    ['timed_out', true, 1, retry, { kind: 'finish', runStatus: 'cancelled' }],
    ['lost', false, 1, null, { kind: 'finish', runStatus: 'failed' }],
    ['lost', false, 3, retry, { kind: 'finish', runStatus: 'lost' }],
  ] as const)(
    'attempt %s, cancel=%s, attempt %i → %j',
    (end, cancelRequested, attemptNo, policy, outcome) => {
      expect(decideRunAfterAttempt({ end, cancelRequested, attemptNo, retry: policy })).toEqual(outcome);
    },
  );

  it.each([
    ['running', 1_000, 1_500, 500, true],
    ['running', 1_000, 1_499, 500, false],
    ['starting', 1_000, 1_000, 0, true],
    ['claimed', 1_000, 9_000, 0, false],
    ['running', null, 9_000, 0, false],
    ['timed_out', 1_000, 9_000, 0, false],
  ] as const)(
    '%s with deadline %s at %i (grace %i) is past: %s',
    (status, deadlineAt, now, grace, passed) => {
      expect(deadlinePassed({ status, deadlineAt }, now, grace)).toBe(passed);
    },
  );
});

describe('step payloads', () => {
  it('the digest names the step and its content, nothing else', () => {
    expect(stepDigest({ step: 'starting' })).toBe(stepDigest({ step: 'starting' }));
    expect(stepDigest({ step: 'running', executorHandle: 'pid:1' })).not.toBe(
      stepDigest({ step: 'running', executorHandle: 'pid:2' }),
    );
    const done = { step: 'completion', outcome: 'succeeded', exitCode: 0, errorSummary: null } as const;
    expect(stepDigest(done)).not.toBe(stepDigest({ ...done, exitCode: null }));
  });
});

describe('decideLogChunk (R-CMP-2)', () => {
  const base = { seq: 3, nextSeq: 3, bytes: 10, runLogBytes: 80, truncated: false, capBytes: 100 };
  it.each([
    [{}, 'store'],
    [{ bytes: 20 }, 'store'],
    [{ bytes: 21 }, 'truncate'],
    [{ truncated: true }, 'drop'],
    [{ seq: 2 }, 'seen'],
    [{ seq: 2, truncated: true }, 'seen'],
    [{ seq: 4 }, 'gap'],
  ] as const)('%j → %s', (change, kind) => {
    expect(decideLogChunk({ ...base, ...change }).kind).toBe(kind);
  });
});
