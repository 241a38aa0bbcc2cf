import {
  HEARTBEAT,
  buildHeartbeatRequest,
  buildHeartbeatResponse,
  parseHeartbeat,
  parseHeartbeatAnswer,
} from './heartbeat';
import { fieldsAfter } from './call';
import { refusalOf, storedSession } from './golden';

const sessionId = '01938e1e-0000-7000-8000-00000000b001';
const cancelled = '01938e1e-0000-7000-8000-00000000b0c1';
const expect_ = { workerId: 'nas-hangzhou', sessionId };
const GOLDEN_ANSWER =
  `{"workerId":"nas-hangzhou","sessionId":"${sessionId}","generation":3,"version":41,"status":"draining",` +
  `"leaseExpiresAt":"2026-12-07T12:00:30.000Z","maxConcurrentRuns":4,"availableSlots":0,"cancelAttemptIds":["${cancelled}"]}`;
const edit = (patch: Record<string, unknown>) =>
  JSON.stringify({ ...(JSON.parse(GOLDEN_ANSWER) as object), ...patch });

describe('heartbeat (ingress/heartbeat.ts)', () => {
  it('builds the golden bodies: recoveryRequired only when records wait', () => {
    const fence = { generation: 3, expectedVersion: 40 };
    expect(JSON.stringify(buildHeartbeatRequest({ ...fence, availableSlots: 4, recoveryRequired: 0 }))).toBe(
      '{"generation":3,"expectedVersion":40,"availableSlots":4}',
    );
    expect(JSON.stringify(buildHeartbeatRequest({ recoveryRequired: 2, availableSlots: 1, ...fence }))).toBe(
      '{"generation":3,"expectedVersion":40,"availableSlots":1,"recoveryRequired":2}',
    );
  });

  it('the control plane reads the body, refusing unknown fields and values over the limits', () => {
    const body = { generation: 3, expectedVersion: 40, availableSlots: 4 };
    expect(parseHeartbeat(body)).toEqual(body);
    expect(refusalOf(() => parseHeartbeat({ ...body, 队列: 1 }))).toBe('队列: unknown_field');
    expect(refusalOf(() => parseHeartbeat({ ...body, availableSlots: 1025 }))).toBe(
      'availableSlots: out_of_range',
    );
    expect(refusalOf(() => parseHeartbeat({ ...body, recoveryRequired: 1025 }))).toBe(
      'recoveryRequired: out_of_range',
    );
    expect(refusalOf(() => parseHeartbeat({ ...body, generation: 0 }))).toBe('generation: out_of_range');
  });

  it('the control plane builds the golden answer: the session, then the cancel intents', () => {
    const session = storedSession({
      workerId: 'nas-hangzhou',
      sessionId,
      generation: 3,
      version: 41,
      status: 'draining' as const,
      maxConcurrentRuns: 4,
      availableSlots: 0,
    });
    expect(JSON.stringify(buildHeartbeatResponse(session, [cancelled]))).toBe(GOLDEN_ANSWER);
  });

  it('reads the golden answer; an answer without cancel intents reads as none', () => {
    expect(parseHeartbeatAnswer(GOLDEN_ANSWER, expect_)).toEqual(JSON.parse(GOLDEN_ANSWER));
    expect(parseHeartbeatAnswer(edit({ cancelAttemptIds: undefined }), expect_).cancelAttemptIds).toEqual([]);
  });

  it('refuses unknown fields, a register outcome, bad or too many cancel intents, another session', () => {
    expect(refusalOf(() => parseHeartbeatAnswer(edit({ 下次: 1 }), expect_))).toBe('下次:unknown_field');
    expect(refusalOf(() => parseHeartbeatAnswer(edit({ outcome: 'created' }), expect_))).toBe(
      'outcome:unknown_field',
    );
    const many = Array.from({ length: 65 }, () => cancelled);
    expect(refusalOf(() => parseHeartbeatAnswer(edit({ cancelAttemptIds: many }), expect_))).toBe(
      'cancelAttemptIds:too_many_items',
    );
    expect(refusalOf(() => parseHeartbeatAnswer(edit({ cancelAttemptIds: ['任务-1'] }), expect_))).toBe(
      'cancelAttemptIds[0]:invalid_uuid',
    );
    expect(refusalOf(() => parseHeartbeatAnswer(edit({ sessionId: cancelled }), { ...expect_ }))).toBe(
      'sessionId:other_session',
    );
    expect(refusalOf(() => parseHeartbeatAnswer(edit({ status: 'expired' }), expect_))).toBe(
      'status:must_be_one_of:online|draining|offline',
    );
    expect(refusalOf(() => parseHeartbeatAnswer(edit({ leaseExpiresAt: '明天' }), expect_))).toBe(
      'leaseExpiresAt:invalid_format',
    );
  });

  it('records what came after v1: recoveryRequired and the cancel intents', () => {
    expect(fieldsAfter(HEARTBEAT, 1, 'request')).toEqual(['recoveryRequired']);
    expect(fieldsAfter(HEARTBEAT, 1, 'answer')).toEqual(['cancelAttemptIds']);
  });
});
