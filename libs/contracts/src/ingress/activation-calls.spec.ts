// The unit spec of `starting.ts`, `running.ts` and `start-failure.ts`: the lease fence, then (for two
// of them) one field of their own; each answers `qinglong/remote-run-activation@v1`, whose parser
// has its own spec (activation-answer.spec.ts).
import * as running from './running';
import * as startFailure from './start-failure';
import * as starting from './starting';
import { fieldsAfter } from './call';
import { refusalOf } from './golden';
import { RUN_ACTIVATION_SCHEMA } from './activation-answer';

const fence = { generation: 3, expectedVersion: 12 };
const lease = {
  offerId: '01938e1e-0000-7000-8000-00000000f001',
  leaseToken: 'Qq'.repeat(22),
  leaseGeneration: 2,
  leaseVersion: 7,
};
const FENCE_JSON = `"generation":3,"expectedVersion":12,"offerId":"${lease.offerId}","leaseToken":"${lease.leaseToken}","leaseGeneration":2,"leaseVersion":7`;

describe.each([
  {
    action: 'starting',
    call: starting.STARTING,
    build: () => starting.buildStartingRequest(fence, lease),
    parse: starting.parseStartingRequest as (body: unknown) => unknown,
    golden: `{${FENCE_JSON}}`,
    own: null,
  },
  {
    action: 'running',
    call: running.RUNNING,
    build: () => running.buildRunningRequest(fence, { executorHandle: 'pid:4242', ...lease }),
    parse: running.parseRunningRequest as (body: unknown) => unknown,
    golden: `{${FENCE_JSON},"executorHandle":"pid:4242"}`,
    own: { field: 'executorHandle', bad: 'pid 4242', rule: 'invalid_format', long: 'x'.repeat(129) },
  },
  {
    action: 'start-failure',
    call: startFailure.START_FAILURE,
    build: () => startFailure.buildStartFailureRequest(fence, { errorCode: 'secrets_unavailable', ...lease }),
    parse: startFailure.parseStartFailureRequest as (body: unknown) => unknown,
    golden: `{${FENCE_JSON},"errorCode":"secrets_unavailable"}`,
    own: { field: 'errorCode', bad: 'Spawn', rule: 'invalid_format', long: 'x'.repeat(65) },
  },
])('$action (ingress/$action.ts)', ({ call, build, parse, golden, own }) => {
  it('builds the golden body in wire order and the control plane reads it', () => {
    const body = build();
    expect(JSON.stringify(body)).toBe(golden);
    expect(parse(body)).toEqual(body);
  });

  it('refuses unknown fields and values over the limits, naming the field', () => {
    const body = JSON.parse(golden) as Record<string, unknown>;
    expect(refusalOf(() => parse({ ...body, 任务名: '京东签到' }))).toBe('任务名: unknown_field');
    expect(refusalOf(() => parse({ ...body, leaseVersion: -1 }))).toBe('leaseVersion: out_of_range');
    if (!own) return;
    expect(refusalOf(() => parse({ ...body, [own.field]: own.bad }))).toBe(`${own.field}: ${own.rule}`);
    expect(refusalOf(() => parse({ ...body, [own.field]: own.long }))).toBe(`${own.field}: too_long`);
    const { [own.field]: _gone, ...without } = body;
    expect(refusalOf(() => parse(without))).toBe(`${own.field}: must_be_string`);
  });

  it('answers the activation schema; only the answer’s deadlineGraceMs came after v1', () => {
    expect(call.schema).toBe(RUN_ACTIVATION_SCHEMA);
    expect(fieldsAfter(call, 1, 'answer')).toEqual(['snapshot.deadlineGraceMs']);
    expect(fieldsAfter(call, 1, 'request')).toEqual([]);
  });
});
