// The unit spec of `drain.ts` and `offline.ts`: the same contract (the session fence, the session
// answer) under two actions, so one table drives both.
import * as drain from './drain';
import * as offline from './offline';
import { fieldsAfter } from './call';
import { buildSessionResponse } from './session';
import { refusalOf, storedSession } from './golden';

const sessionId = '01938e1e-0000-7000-8000-00000000c001';
const expect_ = { workerId: 'router-chengdu', sessionId };
const golden = (status: string) =>
  `{"workerId":"router-chengdu","sessionId":"${sessionId}","generation":2,"version":7,"status":"${status}",` +
  '"leaseExpiresAt":"2026-12-07T12:00:30.000Z","maxConcurrentRuns":1,"availableSlots":0}';

describe.each([
  {
    action: 'drain',
    call: drain.DRAIN,
    build: drain.buildDrainRequest,
    parseRequest: drain.parseDrainRequest,
    parseAnswer: drain.parseDrainAnswer,
    status: 'draining',
  },
  {
    action: 'offline',
    call: offline.OFFLINE,
    build: offline.buildOfflineRequest,
    parseRequest: offline.parseOfflineRequest,
    parseAnswer: offline.parseOfflineAnswer,
    status: 'offline',
  },
])('$action (ingress/$action.ts)', ({ action, call, build, parseRequest, parseAnswer, status }) => {
  const GOLDEN_ANSWER = golden(status);
  const edit = (patch: Record<string, unknown>) =>
    JSON.stringify({ ...(JSON.parse(GOLDEN_ANSWER) as object), ...patch });

  it('builds the golden body (the session fence alone) and the control plane reads it', () => {
    const body = build({ expectedVersion: 6, generation: 2 });
    expect(JSON.stringify(body)).toBe('{"generation":2,"expectedVersion":6}');
    expect(parseRequest(body)).toEqual(body);
    expect(refusalOf(() => parseRequest({ ...body, availableSlots: 0 }))).toBe(
      'availableSlots: unknown_field',
    );
    expect(refusalOf(() => parseRequest({ ...body, expectedVersion: -1 }))).toBe(
      'expectedVersion: out_of_range',
    );
  });

  it('the control plane builds the golden answer (buildSessionResponse)', () => {
    const session = storedSession({
      workerId: 'router-chengdu',
      sessionId,
      generation: 2,
      version: 7,
      status: status as 'draining' | 'offline',
      maxConcurrentRuns: 1,
      availableSlots: 0,
    });
    expect(JSON.stringify(buildSessionResponse(session))).toBe(GOLDEN_ANSWER);
  });

  it('reads the golden answer and refuses unknown fields, extensions and out-of-range values', () => {
    expect(parseAnswer(GOLDEN_ANSWER, expect_)).toEqual(JSON.parse(GOLDEN_ANSWER));
    expect(refusalOf(() => parseAnswer(edit({ 原因: '维护' }), expect_))).toBe('原因:unknown_field');
    expect(refusalOf(() => parseAnswer(edit({ cancelAttemptIds: [] }), expect_))).toBe(
      'cancelAttemptIds:unknown_field',
    );
    expect(refusalOf(() => parseAnswer(edit({ version: -1 }), expect_))).toBe('version:out_of_range');
    expect(refusalOf(() => parseAnswer(edit({ workerId: 'Router' }), expect_))).toBe(
      'workerId:invalid_format',
    );
    expect(refusalOf(() => parseAnswer(' '.repeat(call.answerLimit + 1), expect_))).toBe('too_large');
  });

  it('is v1 as first released', () => {
    expect(call.action).toBe(action);
    expect(fieldsAfter(call, 1, 'request')).toEqual([]);
    expect(fieldsAfter(call, 1, 'answer')).toEqual([]);
  });
});
