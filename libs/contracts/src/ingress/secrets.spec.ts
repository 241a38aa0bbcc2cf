import { parseTaskSpec } from '@ql/domain';
import { SECRETS, buildSecretsRequest, parseSecretsAnswer, parseSecretsRequest } from './secrets';
import { fieldsAfter } from './call';

const attemptId = '01938e1e-0000-7000-8000-00000000f301';
const { spec } = parseTaskSpec({
  name: '京东签到',
  command: 'node jd_sign.js',
  runtime: 'node',
  secretEnv: { JD_COOKIE: 'jd-cookie-zhangsan&jd-cookie-lisi', PUSH_KEY: 'serverchan-key' },
});
const refusal = (body: string) => {
  try {
    parseSecretsAnswer(body, attemptId, spec);
    return 'accepted';
  } catch (error) {
    return (error as Error).message;
  }
};

describe('secrets (ingress/secrets.ts)', () => {
  it('builds the golden body (the lease fence) and the control plane reads it', () => {
    const lease = { offerId: attemptId, leaseToken: 'Ss'.repeat(22), leaseGeneration: 1, leaseVersion: 2 };
    const body = buildSecretsRequest({ generation: 1, expectedVersion: 3 }, lease);
    expect(JSON.stringify(body)).toBe(
      `{"generation":1,"expectedVersion":3,"offerId":"${attemptId}","leaseToken":"${lease.leaseToken}","leaseGeneration":1,"leaseVersion":2}`,
    );
    expect(parseSecretsRequest(body)).toEqual(body);
  });

  it('reads the golden answer: the mapped names, each a value', () => {
    const golden = `{"attemptId":"${attemptId}","env":{"JD_COOKIE":"pt_key=甲&pt_key=乙","PUSH_KEY":"SCT123"}}`;
    expect(parseSecretsAnswer(Buffer.from(golden), attemptId, spec)).toEqual({
      JD_COOKIE: 'pt_key=甲&pt_key=乙',
      PUSH_KEY: 'SCT123',
    });
  });

  it('refuses another attempt, other names, unknown fields and bad values, never naming a value', () => {
    const env = '{"JD_COOKIE":"pt_key=甲","PUSH_KEY":"SCT123"}';
    expect(refusal(`{"attemptId":"${SECRETS.action}","env":${env}}`)).toBe('attemptId: other_attempt');
    expect(refusal(`{"attemptId":"${attemptId}","env":{"JD_COOKIE":"v"}}`)).toBe('env: not_the_mapped_names');
    expect(refusal(`{"attemptId":"${attemptId}","env":{"JD_COOKIE":"pt_key=甲","PUSH_KEY":7}}`)).toBe(
      'env.PUSH_KEY: invalid_value',
    );
    expect(refusal(`{"attemptId":"${attemptId}","env":${env},"备注":1}`)).toBe('备注: unknown_field');
    expect(refusal(`{"attemptId":"${attemptId}","env":{"JD_COOKIE":"秘密","PUSH_KEY":""}}`)).not.toContain(
      '秘密',
    );
    expect(refusal(' '.repeat(SECRETS.answerLimit + 1))).toBe('secrets answer: too_large');
  });

  it('is v1 as first released but for the refusal of a run being cancelled', () => {
    expect(fieldsAfter(SECRETS, 1, 'request')).toEqual([]);
    expect(fieldsAfter(SECRETS, 1, 'answer')).toEqual([]);
    expect(SECRETS.refusals.filter((r) => r.since === 2)).toEqual([
      { status: 422, code: 'secrets_unavailable', reason: 'cancel_requested', since: 2 },
    ]);
  });
});
