import { parseTaskSpec } from '@ql/domain';
import { refusalOf } from './golden';
import { COMPLETION } from './completion';
import { HEARTBEAT } from './heartbeat';
import { EXECUTION_OFFER_SCHEMA, OFFERS, parseOfferResponse } from './offers';
import { LOGS } from './logs';
import {
  offerSpecFor,
  refuseNewerAnswerFields,
  refuseNewerRequestFields,
  shapeAnswer,
  shapeRefusal,
} from './wire-shape';

const session = {
  workerId: 'router-shanghai',
  sessionId: '01938e1e-0000-7000-8000-00000000a001',
  generation: 1,
  version: 3,
  status: 'online',
  leaseExpiresAt: '2026-12-07T12:00:30.000Z',
  maxConcurrentRuns: 2,
  availableSlots: 1,
};
const heartbeat = { ...session, cancelAttemptIds: ['01938e1e-0000-7000-8000-00000000b001'] };
const activation = {
  schema: 'qinglong/remote-run-activation@v1',
  status: 'accepted',
  snapshot: {
    runId: '01938e1e-0000-7000-8000-00000000c001',
    deadlineAt: '2026-12-07T12:10:00.000Z',
    deadlineGraceMs: 5000,
  },
};
const rule = (read: () => void) => refusalOf(read);

describe('answers shaped per wire version (ADR 0060)', () => {
  it('a v1 session gets no field added since: the heartbeat without cancelAttemptIds, the snapshot without deadlineGraceMs', () => {
    expect(shapeAnswer(HEARTBEAT, 1, heartbeat)).toEqual(session);
    const { deadlineGraceMs: _grace, ...v1Snapshot } = activation.snapshot;
    expect(shapeAnswer(COMPLETION, 1, activation)).toEqual({ ...activation, snapshot: v1Snapshot });
    // What was built is left as it was; v2 gets every field.
    expect(heartbeat.cancelAttemptIds).toHaveLength(1);
    expect(shapeAnswer(HEARTBEAT, 2, heartbeat)).toEqual(heartbeat);
    expect(shapeAnswer(COMPLETION, 2, activation)).toEqual(activation);
  });

  it("the v1 reader's check refuses a newer field, naming it, and lets a v1 answer through", () => {
    expect(rule(() => refuseNewerAnswerFields(HEARTBEAT, 1, heartbeat))).toBe(
      'cancelAttemptIds:unknown_field',
    );
    expect(rule(() => refuseNewerAnswerFields(COMPLETION, 1, activation))).toBe(
      'snapshot.deadlineGraceMs:unknown_field',
    );
    expect(rule(() => refuseNewerAnswerFields(HEARTBEAT, 1, session))).toBe('accepted');
    expect(rule(() => refuseNewerAnswerFields(HEARTBEAT, 2, heartbeat))).toBe('accepted');
  });

  describe('the offer', () => {
    const zoned = parseTaskSpec({
      name: '东东农场',
      command: 'node jd_farm.js',
      runtime: 'node',
      timezone: 'Asia/Shanghai',
      cron: '30 6 * * *',
    });
    const offer = (execution: { digest: string; spec: unknown }) =>
      JSON.stringify({
        schema: EXECUTION_OFFER_SCHEMA,
        status: 'offered',
        run: {
          runId: '01938e1e-0000-7000-8000-00000000c001',
          taskId: '01938e1e-0000-7000-8000-00000000c002',
          revision: 1,
          attemptId: '01938e1e-0000-7000-8000-00000000c003',
          attemptNo: 1,
        },
        execution,
        lease: {
          offerId: '01938e1e-0000-7000-8000-00000000c004',
          sessionGeneration: 1,
          leaseGeneration: 1,
          version: 0,
          expiresAt: '2026-12-07T12:00:00.000Z',
        },
      });

    it('to a v1 session: the spec without its time zone, with the digest of that spec, which the v1 reader accepts', () => {
      const v1 = offerSpecFor(1, zoned.spec, zoned.digest)!;
      expect(v1.spec).not.toHaveProperty('timezone');
      expect(v1.spec).toMatchObject({ name: '东东农场', cron: '30 6 * * *' });
      expect(v1.digest).toBe(parseTaskSpec({ ...zoned.spec, timezone: undefined }).digest);
      expect(v1.digest).not.toBe(zoned.digest);
      const answer = offer(v1);
      expect(parseOfferResponse(answer).status).toBe('offered');
      expect(rule(() => refuseNewerAnswerFields(OFFERS, 1, JSON.parse(answer)))).toBe('accepted');
      // As stored, to a v2 session; which a v1 reader refuses.
      expect(offerSpecFor(2, zoned.spec, zoned.digest)).toEqual({ spec: zoned.spec, digest: zoned.digest });
      expect(rule(() => refuseNewerAnswerFields(OFFERS, 1, JSON.parse(offer(zoned))))).toBe(
        'execution.spec.timezone:unknown_field',
      );
    });

    it('a spec without v2 fields is the same for both; one with secretEnv has no v1 projection', () => {
      const plain = parseTaskSpec({ name: '签到', command: 'echo 签到', runtime: 'shell' });
      expect(offerSpecFor(1, plain.spec, plain.digest)).toEqual({ spec: plain.spec, digest: plain.digest });
      const secret = parseTaskSpec({
        name: '签到',
        command: 'echo "$JD_COOKIE"',
        runtime: 'shell',
        secretEnv: { JD_COOKIE: 'jd-cookie' },
      });
      expect(offerSpecFor(1, secret.spec, secret.digest)).toBeUndefined();
    });
  });
});

describe('refusals shaped per wire version (ADR 0062 §7)', () => {
  it('a v1 session gets the v1 code for a revoked certificate and no migrations_pending reason; v2 gets them as they are', () => {
    const revoked = { code: 'certificate_revoked', message: 'revoked' };
    expect(shapeRefusal(1, revoked)).toEqual({ code: 'worker_authentication_required', message: 'revoked' });
    expect(shapeRefusal(2, revoked)).toBe(revoked);
    const pending = { code: 'worker_ingress_unavailable', message: 'later', reason: 'migrations_pending' };
    expect(shapeRefusal(1, pending)).toEqual({ code: 'worker_ingress_unavailable', message: 'later' });
    expect(shapeRefusal(2, pending)).toBe(pending);
    // A v1 refusal is the same for every version.
    const fenced = { code: 'worker_session_fenced', message: 'fenced', reason: 'version_mismatch' };
    expect(shapeRefusal(1, fenced)).toBe(fenced);
  });
});

describe('a control plane serving v1 only reads requests as v1 did (ADR 0062 §8)', () => {
  it('refuses a newer field by name and output controls but tab, LF and CR; lets v1 through', () => {
    expect(() => refuseNewerRequestFields(LOGS, 1, { seq: 0, stream: 'stdout', text: 'ok' })).toThrow(
      'stream: unknown_field',
    );
    expect(() => refuseNewerRequestFields(LOGS, 1, { seq: 0, text: '\u001b[31mred' })).toThrow(
      'text: control_character',
    );
    expect(() => refuseNewerRequestFields(HEARTBEAT, 1, { availableSlots: 1, recoveryRequired: 0 })).toThrow(
      'recoveryRequired: unknown_field',
    );
    expect(() => refuseNewerRequestFields(LOGS, 1, { seq: 0, text: '签到\tok\r\n' })).not.toThrow();
    expect(() =>
      refuseNewerRequestFields(LOGS, 2, { seq: 0, stream: 'stdout', text: '\u001b[0m' }),
    ).not.toThrow();
  });
});
