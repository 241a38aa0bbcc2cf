// The unit spec of `renew.ts` and `release.ts`: the same request (the lease fence) and the same lease
// projection in the answer, so one table drives both; what differs (the cancel flag) is tested apart.
import * as renew from './renew';
import * as release from './release';
import { fieldsAfter } from './call';
import { buildReleaseResponse, buildRenewResponse } from './lease-answer';
import { refusalOf } from './golden';

const offerId = '01938e1e-0000-7000-8000-00000000e001';
const leaseToken = 'Zq'.repeat(22);
const lease = `{"offerId":"${offerId}","sessionGeneration":2,"leaseGeneration":1,"version":5,"expiresAt":"2026-12-07T12:00:30.000Z"}`;

describe.each([
  {
    action: 'renew',
    call: renew.RENEW,
    build: renew.buildRenewRequest,
    parseRequest: renew.parseRenewRequest,
    parseAnswer: renew.parseRenewAnswer as (b: string | Buffer) => unknown,
    golden: `{"lease":${lease},"cancelRequested":true}`,
  },
  {
    action: 'release',
    call: release.RELEASE,
    build: release.buildReleaseRequest,
    parseRequest: release.parseReleaseRequest,
    parseAnswer: release.parseReleaseAnswer as (b: string | Buffer) => unknown,
    golden: `{"lease":${lease}}`,
  },
])('$action (ingress/$action.ts)', ({ action, call, build, parseRequest, parseAnswer, golden }) => {
  const edit = (patch: Record<string, unknown>) =>
    JSON.stringify({ ...(JSON.parse(golden) as object), ...patch });

  it('builds the golden body (the lease fence) and the control plane reads it', () => {
    const body = build(
      { generation: 2, expectedVersion: 9 },
      { leaseVersion: 4, leaseGeneration: 1, leaseToken, offerId },
    );
    expect(JSON.stringify(body)).toBe(
      `{"generation":2,"expectedVersion":9,"offerId":"${offerId}","leaseToken":"${leaseToken}","leaseGeneration":1,"leaseVersion":4}`,
    );
    expect(parseRequest(body)).toEqual(body);
    expect(refusalOf(() => parseRequest({ ...body, 任务: '京东签到' }))).toBe('任务: unknown_field');
    expect(refusalOf(() => parseRequest({ ...body, leaseGeneration: 2 ** 31 }))).toBe(
      'leaseGeneration: out_of_range',
    );
  });

  it('reads the golden answer from its bytes', () => {
    expect(parseAnswer(Buffer.from(golden))).toEqual(JSON.parse(golden));
  });

  it('refuses unknown fields, values out of range, duplicate keys and an oversized answer', () => {
    expect(refusalOf(() => parseAnswer(edit({ 令牌: 'x' })))).toBe('令牌:unknown_field');
    const leaseWith = (patch: object) => edit({ lease: { ...(JSON.parse(lease) as object), ...patch } });
    expect(refusalOf(() => parseAnswer(leaseWith({ version: -1 })))).toBe('lease.version:out_of_range');
    expect(refusalOf(() => parseAnswer(leaseWith({ token: leaseToken })))).toBe('lease.token:unknown_field');
    expect(refusalOf(() => parseAnswer(`{"lease":${lease},"lease":${lease}}`))).toBe('lease:duplicate_key');
    expect(refusalOf(() => parseAnswer(' '.repeat(call.answerLimit + 1)))).toBe('too_large');
    expect(refusalOf(() => parseAnswer('null'))).toBe(':must_be_object');
  });

  it('is v1 as first released', () => {
    expect(call.action).toBe(action);
    expect(fieldsAfter(call, 1, 'request')).toEqual([]);
    expect(fieldsAfter(call, 1, 'answer')).toEqual([]);
  });
});

describe('the control plane builds the golden answers from a stored lease', () => {
  it('renew: the lease, then the cancel flag; release: the lease', () => {
    const stored = {
      offerId,
      attemptId: '01938e1e-0000-7000-8000-00000000e0a1',
      runId: '01938e1e-0000-7000-8000-00000000e0b1',
      workerId: 'router-guangzhou',
      sessionId: '01938e1e-0000-7000-8000-00000000e0c1',
      sessionGeneration: 2,
      leaseGeneration: 1,
      version: 5,
      state: 'active' as const,
      expiresAt: Date.parse('2026-12-07T12:00:30.000Z'),
      claimedAt: Date.parse('2026-12-07T12:00:00.000Z'),
    };
    expect(JSON.stringify(buildRenewResponse(stored, true))).toBe(
      `{"lease":${lease},"cancelRequested":true}`,
    );
    expect(JSON.stringify(buildReleaseResponse(stored))).toBe(`{"lease":${lease}}`);
  });
});

describe('the cancel flag (renew only, R-RUN-5)', () => {
  it('renew needs it, a boolean; release carries none', () => {
    const renewAnswer = (flag: unknown) =>
      JSON.stringify({ lease: JSON.parse(lease) as object, cancelRequested: flag });
    expect(renew.parseRenewAnswer(renewAnswer(false)).cancelRequested).toBe(false);
    expect(refusalOf(() => renew.parseRenewAnswer(`{"lease":${lease}}`))).toBe(
      'cancelRequested:must_be_boolean',
    );
    expect(refusalOf(() => renew.parseRenewAnswer(renewAnswer('是')))).toBe(
      'cancelRequested:must_be_boolean',
    );
    expect(refusalOf(() => release.parseReleaseAnswer(renewAnswer(false)))).toBe(
      'cancelRequested:unknown_field',
    );
  });
});
