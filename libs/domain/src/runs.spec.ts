import {
  ATTEMPT_STATUSES,
  ATTEMPT_TRANSITIONS,
  RUN_STATUSES,
  RUN_TRANSITIONS,
  assertAttemptTransition,
  assertRunTransition,
  decideExpiry,
  isTerminalRun,
} from './runs';
import { IllegalStateError } from './errors';

const pairs = <T extends string>(states: readonly T[]) =>
  states.flatMap((a) => states.map((b) => [a, b] as const));

describe('run transition table (R-RUN-2)', () => {
  const allowed = new Set(
    Object.entries(RUN_TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `${from}>${to}`)),
  );

  it.each(pairs(RUN_STATUSES))('%s → %s is allowed exactly when the table says so', (from, to) => {
    const call = () => assertRunTransition(from, to);
    if (allowed.has(`${from}>${to}`)) expect(call).not.toThrow();
    else expect(call).toThrow(IllegalStateError);
  });

  it('terminal runs go nowhere; every non-terminal state can end in cancelled (cancellation wins)', () => {
    for (const s of RUN_STATUSES) {
      if (isTerminalRun(s)) expect(RUN_TRANSITIONS[s]).toEqual([]);
      else expect(RUN_TRANSITIONS[s]).toContain('cancelled');
    }
    expect(RUN_STATUSES.filter(isTerminalRun)).toEqual([
      'succeeded',
      'failed',
      'cancelled',
      'timed_out',
      'lost',
    ]);
  });

  it('the paths of this issue exist: claim, release/expiry before start, retry, loss', () => {
    expect(RUN_TRANSITIONS.queued).toContain('dispatching');
    expect(RUN_TRANSITIONS.dispatching).toEqual(
      expect.arrayContaining(['queued', 'retry_wait', 'failed', 'lost']),
    );
    expect(RUN_TRANSITIONS.running).toEqual(expect.arrayContaining(['retry_wait', 'failed', 'lost']));
    expect(RUN_TRANSITIONS.retry_wait).toEqual(['queued', 'cancelled']);
  });
});

describe('attempt transition table (R-RUN-2)', () => {
  const allowed = new Set(
    Object.entries(ATTEMPT_TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `${from}>${to}`)),
  );
  it.each(pairs(ATTEMPT_STATUSES))('%s → %s is allowed exactly when the table says so', (from, to) => {
    const call = () => assertAttemptTransition(from, to);
    if (allowed.has(`${from}>${to}`)) expect(call).not.toThrow();
    else expect(call).toThrow(IllegalStateError);
  });

  it('an attempt can only be lost once it started; running needs starting first', () => {
    expect(ATTEMPT_TRANSITIONS.claimed).not.toContain('lost');
    expect(ATTEMPT_TRANSITIONS.claimed).not.toContain('running');
    expect(ATTEMPT_TRANSITIONS.starting).toContain('running');
  });
});

describe('decideExpiry (R-RUN-4, R-LSE-5)', () => {
  const retry = { maxAttempts: 3, backoffMs: (n: number) => n * 1000 };
  it.each([
    ['claimed', false, 1, retry, { kind: 'requeue' }],
    ['claimed', false, 1, null, { kind: 'requeue' }],
    ['claimed', true, 1, retry, { kind: 'cancel' }],
    ['starting', false, 1, retry, { kind: 'retry', backoffMs: 2000 }],
    ['running', false, 2, retry, { kind: 'retry', backoffMs: 3000 }],
    ['running', false, 3, retry, { kind: 'fail', runStatus: 'lost' }],
    ['running', false, 1, null, { kind: 'fail', runStatus: 'failed' }],
    ['running', true, 1, retry, { kind: 'cancel' }],
  ] as const)(
    '%s, cancel=%s, attempt %i → %j',
    (attemptStatus, cancelRequested, attemptNo, policy, outcome) => {
      expect(decideExpiry({ attemptStatus, cancelRequested, attemptNo, retry: policy })).toEqual(outcome);
    },
  );
});
