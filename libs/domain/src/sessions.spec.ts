import fc from 'fast-check';
import { FencedError } from './errors';
import {
  RegistrationContext,
  WorkerSession,
  decideRegistration,
  fenceViolation,
  isReplayOfLastCall,
  sessionCallKey,
} from './sessions';

const NOW = 1_000_000;
const session: WorkerSession = {
  workerId: 'w1',
  sessionId: 's-current',
  generation: 3,
  version: 7,
  status: 'online',
  leaseExpiresAt: NOW + 10_000,
  maxConcurrentRuns: 4,
  availableSlots: 2,
  registrationDigest: 'digest-a',
};
const ctx = (over: Partial<RegistrationContext> = {}): RegistrationContext => ({
  current: session,
  disabled: false,
  sessionPreviouslyUsed: false,
  ...over,
});

function reasonOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    if (e instanceof FencedError) return e.reason;
    throw e;
  }
}

describe('decideRegistration (R-REG-4)', () => {
  it.each<[string, RegistrationContext, string, string, string]>([
    ['first registration', ctx({ current: null }), 's-new', 'digest-a', 'create'],
    ['replay of the live session', ctx(), 's-current', 'digest-a', 'replay'],
    ['new session replaces', ctx(), 's-new', 'digest-b', 'replace'],
  ])('%s', (_name, c, sessionId, digest, kind) => {
    expect(decideRegistration(c, sessionId, { digest }, NOW).kind).toBe(kind);
  });

  it('a first row continues after the generations a deleted row of the same worker held', () => {
    expect(decideRegistration(ctx({ current: null }), 's-new', { digest: 'x' }, NOW)).toEqual({
      kind: 'create',
      generation: 1,
      version: 0,
    });
    const again = decideRegistration(
      ctx({ current: null, lastGeneration: 7 }),
      's-new',
      { digest: 'x' },
      NOW,
    );
    expect(again).toEqual({ kind: 'create', generation: 8, version: 0 });
  });

  it('replacement strictly increases generation and version', () => {
    const d = decideRegistration(ctx(), 's-new', { digest: 'x' }, NOW);
    expect(d).toMatchObject({ kind: 'replace', generation: 4, version: 8 });
  });

  it.each<[string, RegistrationContext, string, string, string]>([
    ['disabled worker', ctx({ disabled: true }), 's-new', 'digest-a', 'worker_disabled'],
    [
      'disabled worker, first time',
      ctx({ current: null, disabled: true }),
      's-new',
      'digest-a',
      'worker_disabled',
    ],
    ['same session, other content', ctx(), 's-current', 'digest-b', 'session_content_mismatch'],
    [
      'same session after offline',
      ctx({ current: { ...session, status: 'offline' } }),
      's-current',
      'digest-a',
      'session_offline',
    ],
    [
      'same session after expiry',
      ctx({ current: { ...session, leaseExpiresAt: NOW } }),
      's-current',
      'digest-a',
      'session_expired',
    ],
    [
      'a replaced session comes back',
      ctx({ sessionPreviouslyUsed: true }),
      's-old',
      'digest-a',
      'session_fenced',
    ],
  ])('refuses %s', (_name, c, sessionId, digest, reason) => {
    expect(reasonOf(() => decideRegistration(c, sessionId, { digest }, NOW))).toBe(reason);
  });
});

describe('fenceViolation (R-REG-5)', () => {
  const fence = { generation: 3, expectedVersion: 7 };
  it.each<[string, WorkerSession | null, boolean, string, typeof fence, string | null]>([
    ['a matching live session', session, false, 's-current', fence, null],
    ['no worker', null, false, 's-current', fence, 'unknown_worker'],
    ['a disabled worker', session, true, 's-current', fence, 'worker_disabled'],
    ['another session', session, false, 's-other', fence, 'session_replaced'],
    ['another generation', session, false, 's-current', { ...fence, generation: 2 }, 'generation_mismatch'],
    ['an offline session', { ...session, status: 'offline' }, false, 's-current', fence, 'session_offline'],
    ['an expired lease', { ...session, leaseExpiresAt: NOW }, false, 's-current', fence, 'session_expired'],
    ['a stale version', session, false, 's-current', { ...fence, expectedVersion: 6 }, 'version_mismatch'],
    ['a future version', session, false, 's-current', { ...fence, expectedVersion: 8 }, 'version_mismatch'],
  ])('%s', (_name, current, disabled, sessionId, f, expected) => {
    expect(fenceViolation(current, disabled, sessionId, f, NOW)).toBe(expected);
  });
});

describe('isReplayOfLastCall (R-WRK-7, ADR 0012)', () => {
  // The session as the lost heartbeat {generation 3, expectedVersion 6, availableSlots 2} left it.
  const last = sessionCallKey('heartbeat', 2);
  const fence = { generation: 3, expectedVersion: 6 };
  type Case = [
    string,
    Partial<WorkerSession> | null,
    string | null,
    boolean,
    string,
    string,
    typeof fence,
    boolean,
  ];
  it.each<Case>([
    ['the very same call', {}, last, false, 's-current', last, fence, true],
    ['no worker', null, last, false, 's-current', last, fence, false],
    ['no call applied yet', {}, null, false, 's-current', last, fence, false],
    ['a disabled worker', {}, last, true, 's-current', last, fence, false],
    ['another session', {}, last, false, 's-other', last, fence, false],
    ['another generation', {}, last, false, 's-current', last, { ...fence, generation: 2 }, false],
    ['another body', {}, last, false, 's-current', sessionCallKey('heartbeat', 1), fence, false],
    ['another action', {}, last, false, 's-current', sessionCallKey('drain'), fence, false],
    [
      'a call older than the last',
      {},
      last,
      false,
      's-current',
      last,
      { ...fence, expectedVersion: 5 },
      false,
    ],
    [
      'the current fence (not applied)',
      {},
      last,
      false,
      's-current',
      last,
      { ...fence, expectedVersion: 7 },
      false,
    ],
    ['an expired lease', { leaseExpiresAt: NOW }, last, false, 's-current', last, fence, false],
    [
      'an offline session, not by this call',
      { status: 'offline' },
      last,
      false,
      's-current',
      last,
      fence,
      false,
    ],
    [
      'the offline call itself, lease ended',
      { status: 'offline', leaseExpiresAt: NOW },
      'offline',
      false,
      's-current',
      'offline',
      fence,
      true,
    ],
  ])('%s', (_name, over, lastCall, disabled, sessionId, callKey, f, expected) => {
    const current = over === null ? null : { ...session, ...over };
    expect(isReplayOfLastCall(current, lastCall, disabled, sessionId, callKey, f, NOW)).toBe(expected);
  });
});

describe("fenceViolation over a session's life (R-REG-5, property)", () => {
  it('once the version has moved, no fence from before passes again; the current one does', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), (moves) => {
        const moved = { ...session, version: session.version + moves };
        const fence = (expectedVersion: number) => ({ generation: moved.generation, expectedVersion });
        for (let old = session.version; old < moved.version; old++)
          expect(fenceViolation(moved, false, moved.sessionId, fence(old), NOW)).toBe('version_mismatch');
        expect(fenceViolation(moved, false, moved.sessionId, fence(moved.version), NOW)).toBeNull();
      }),
    );
  });
});
