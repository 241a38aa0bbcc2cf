import { parseTaskSpec } from '@ql/domain';
import {
  EXECUTION_OFFER_MAX_BYTES,
  EXECUTION_OFFER_SCHEMA,
  OFFERS,
  OfferContractError,
  buildPullRequest,
  parseOfferResponse,
  parsePullRequest,
} from './offers';
import { fieldsAfter } from './call';
import { refusalOf } from './golden';
import { createIdGenerator } from '../system-ports';

const ids = createIdGenerator();
const spec = parseTaskSpec({ name: 'hello', command: 'echo hello', runtime: 'shell' });

function offer(): Record<string, unknown> {
  return {
    schema: EXECUTION_OFFER_SCHEMA,
    status: 'offered',
    run: { runId: ids.uuidV7(), taskId: ids.uuidV7(), revision: 1, attemptId: ids.uuidV7(), attemptNo: 1 },
    execution: { digest: spec.digest, spec: spec.spec },
    lease: {
      offerId: ids.uuidV7(),
      sessionGeneration: 1,
      leaseGeneration: 1,
      version: 0,
      expiresAt: '2026-12-01T12:00:00.000Z',
    },
  };
}
const idle = {
  schema: EXECUTION_OFFER_SCHEMA,
  status: 'idle',
  idle: { reason: 'no_queued_runs', activeLeases: 0, capacity: 4, scanned: 0 },
};

function refusal(input: string | Buffer): string {
  try {
    parseOfferResponse(input);
  } catch (error) {
    if (error instanceof OfferContractError) return error.rule;
    throw error;
  }
  return 'accepted';
}

// Test edits reach into nested objects freely; the parser under test is what checks their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = Record<string, any>;
const edit = (fn: (o: Loose) => void) => {
  const o = offer() as Loose;
  fn(o);
  return JSON.stringify(o);
};

describe('parseOfferResponse (qinglong/remote-execution-offer@v1)', () => {
  it('accepts an offer and an idle answer, from text or bytes, and returns them as given', () => {
    const o = offer();
    expect(parseOfferResponse(JSON.stringify(o))).toEqual(o);
    expect(parseOfferResponse(Buffer.from(JSON.stringify(idle)))).toEqual(idle);
  });

  it.each(['no_capacity', 'no_queued_runs', 'no_matching_run', 'draining', 'preferred_elsewhere'])(
    'accepts the idle reason %s',
    (reason) => {
      const answer = { ...idle, idle: { ...idle.idle, reason } };
      expect(parseOfferResponse(JSON.stringify(answer))).toEqual(answer);
    },
  );

  it.each([
    ['not json', '{', 'invalid_json'],
    ['wrong schema', edit((o) => (o.schema = 'qinglong/remote-execution-offer@v2')), 'schema:unknown_schema'],
    ['unknown status', edit((o) => (o.status = 'maybe')), 'status:unknown_status'],
    ['unknown top-level field', edit((o) => (o.token = 'x')), 'token:unknown_field'],
    ['idle fields on an offer', edit((o) => (o.idle = idle.idle)), 'idle:unknown_field'],
    ['unknown run field', edit((o) => (o.run.workerId = 'w')), 'run.workerId:unknown_field'],
    [
      'missing lease fence',
      edit((o) => delete o.lease.leaseGeneration),
      'lease.leaseGeneration:must_be_integer',
    ],
    [
      'a token digest in the lease',
      edit((o) => (o.lease.tokenDigest = 'f'.repeat(64))),
      'lease.tokenDigest:unknown_field',
    ],
    ['out-of-range integer', edit((o) => (o.run.revision = 2 ** 31)), 'run.revision:out_of_range'],
    ['negative version', edit((o) => (o.lease.version = -1)), 'lease.version:out_of_range'],
    [
      'non-UUIDv7 id',
      edit((o) => (o.run.runId = '00000000-0000-4000-8000-000000000000')),
      'run.runId:invalid_uuid',
    ],
    [
      'control character',
      edit((o) => (o.lease.expiresAt = '2026-12-01T12:00:00.000Z\u0007')),
      'lease.expiresAt:control_character',
    ],
    [
      'a spec that does not match its digest',
      edit((o) => (o.execution.spec = { ...spec.spec, command: 'rm -rf /' })),
      'execution.digest:digest_mismatch',
    ],
    [
      'a spec with an unknown field',
      edit((o) => (o.execution.spec = { ...spec.spec, shell: '/bin/zsh' })),
      'shell:unknown_field',
    ],
    [
      'an unknown idle reason',
      JSON.stringify({ ...idle, idle: { ...idle.idle, reason: 'sleepy' } }),
      'idle.reason:unknown_reason',
    ],
  ])('refuses %s', (_name, input, expected) => {
    expect(refusal(input)).toBe(expected);
  });

  it('refuses more than 128 KiB before parsing', () => {
    const big = JSON.stringify(offer()).replace(
      '"status"',
      `"pad":"${'x'.repeat(EXECUTION_OFFER_MAX_BYTES)}","status"`,
    );
    expect(refusal(big)).toBe('too_large');
    expect(refusal(Buffer.alloc(EXECUTION_OFFER_MAX_BYTES + 1, 0x20))).toBe('too_large');
  });
});

describe('offers request (ingress/offers.ts)', () => {
  const fence = { generation: 2, expectedVersion: 9 };
  const offerId = '01938e1e-0000-7000-8000-00000000d001';
  const leaseToken = 'A'.repeat(43);

  it('builds the golden bodies: waitMs only for a long poll; the control plane reads them', () => {
    const now = buildPullRequest(fence, { offerId, leaseToken, waitMs: 0 });
    expect(JSON.stringify(now)).toBe(
      `{"generation":2,"expectedVersion":9,"offerId":"${offerId}","leaseToken":"${leaseToken}"}`,
    );
    const held = buildPullRequest(fence, { waitMs: 20_000, leaseToken, offerId });
    expect(JSON.stringify(held)).toBe(
      `{"generation":2,"expectedVersion":9,"offerId":"${offerId}","leaseToken":"${leaseToken}","waitMs":20000}`,
    );
    expect(parsePullRequest(now)).toEqual(now);
    expect(parsePullRequest(held)).toEqual(held);
  });

  it('refuses unknown fields and values over the limits, naming the field', () => {
    const body = buildPullRequest(fence, { offerId, leaseToken });
    expect(refusalOf(() => parsePullRequest({ ...body, 标签: 'x' }))).toBe('标签: unknown_field');
    expect(refusalOf(() => parsePullRequest({ ...body, waitMs: 20_001 }))).toBe('waitMs: out_of_range');
    expect(refusalOf(() => parsePullRequest({ ...body, leaseToken: 'short' }))).toBe(
      'leaseToken: invalid_lease_token',
    );
    expect(refusalOf(() => parsePullRequest({ ...body, offerId: '签到-1' }))).toBe(
      'offerId: invalid_offer_id',
    );
  });

  it('records what came after v1: the long poll and three optional spec fields', () => {
    expect(OFFERS.schema).toBe(EXECUTION_OFFER_SCHEMA);
    expect(fieldsAfter(OFFERS, 1, 'request')).toEqual(['waitMs']);
    expect(fieldsAfter(OFFERS, 1, 'answer').sort()).toEqual([
      'execution.spec.bundle',
      'execution.spec.secretEnv',
      'execution.spec.timezone',
    ]);
  });

  it('reads an offer of a task with a time zone (a v2 field) and a Chinese name', () => {
    const zoned = parseTaskSpec({
      name: '京东签到',
      command: 'node jd_sign.js',
      runtime: 'node',
      cron: '0 7 * * *',
      timezone: 'Asia/Shanghai',
    });
    const o = offer() as Loose;
    o.execution = { digest: zoned.digest, spec: zoned.spec };
    expect(parseOfferResponse(JSON.stringify(o)).status).toBe('offered');
    expect((zoned.spec as { timezone?: string }).timezone).toBe('Asia/Shanghai');
  });
});
