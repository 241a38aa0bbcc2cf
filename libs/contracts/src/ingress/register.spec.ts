import {
  REGISTER,
  RegisterRequest,
  buildRegisterRequest,
  buildRegisterResponse,
  parseRegisterAnswer,
  parseRegistration,
  ProtocolUnsupportedError,
  SUPPORTED_PROTOCOL_VERSIONS,
} from './register';
import { ValidationError } from '@ql/domain';
import { fieldsAfter, wireVersionOf } from './call';
import { refusalOf, storedSession } from './golden';

const sessionId = '01938e1e-0000-7000-8000-00000000a001';
const capabilities = {
  architecture: 'arm64',
  operatingSystem: 'linux',
  executors: ['local-process'],
  runtimes: [{ name: 'node', version: '24.11.0' }],
  labels: { zone: '上海-浦东' },
  memoryMiB: 1024,
  diskMiB: 8192,
  gpus: [],
  features: [],
};
/** The bytes a worker on a 路由器 sends (golden: the wire must not change by a byte). */
const GOLDEN_REQUEST =
  '{"capabilities":{"architecture":"arm64","operatingSystem":"linux","executors":["local-process"],' +
  '"runtimes":[{"name":"node","version":"24.11.0"}],"labels":{"zone":"上海-浦东"},"memoryMiB":1024,' +
  '"diskMiB":8192,"gpus":[],"features":[]},"maxConcurrentRuns":2,"availableSlots":2,' +
  '"softwareVersion":"0.1.0","protocolVersion":3}';
const GOLDEN_ANSWER =
  `{"outcome":"created","workerId":"router-shanghai","sessionId":"${sessionId}","generation":1,` +
  '"version":0,"status":"online","leaseExpiresAt":"2026-12-07T12:00:30.000Z","maxConcurrentRuns":2,' +
  '"availableSlots":2}';
const expect_ = { workerId: 'router-shanghai', sessionId };

describe('register (ingress/register.ts)', () => {
  it('builds the golden body in wire order and the control plane reads it', () => {
    const body = buildRegisterRequest({
      protocolVersion: 3,
      softwareVersion: '0.1.0',
      availableSlots: 2,
      maxConcurrentRuns: 2,
      capabilities,
    });
    expect(JSON.stringify(body)).toBe(GOLDEN_REQUEST);
    expect(parseRegistration(JSON.parse(GOLDEN_REQUEST))).toMatchObject({
      maxConcurrentRuns: 2,
      protocolVersion: 3,
    });
  });

  it('refuses a body the control plane would refuse, naming the field', () => {
    const base = JSON.parse(GOLDEN_REQUEST) as Record<string, unknown>;
    expect(
      refusalOf(() => buildRegisterRequest({ ...(base as unknown as RegisterRequest), availableSlots: 3 })),
    ).toBe('availableSlots: out_of_range');
    expect(refusalOf(() => parseRegistration({ ...base, protocolVersion: 5 }))).toBe(
      'protocolVersion: unsupported',
    );
    expect(refusalOf(() => parseRegistration({ ...base, 任务: 1 }))).toBe('任务: unknown_field');
  });

  it('the control plane builds the golden answer: outcome first, then the session', () => {
    const session = storedSession({
      workerId: 'router-shanghai',
      sessionId,
      generation: 1,
      version: 0,
      status: 'online' as const,
      maxConcurrentRuns: 2,
      availableSlots: 2,
    });
    expect(JSON.stringify(buildRegisterResponse('created', session))).toBe(GOLDEN_ANSWER);
  });

  it('reads the golden answer and refuses unknown fields, other sessions and out-of-range values', () => {
    expect(parseRegisterAnswer(GOLDEN_ANSWER, expect_)).toEqual(JSON.parse(GOLDEN_ANSWER));
    const edit = (patch: Record<string, unknown>) =>
      JSON.stringify({ ...(JSON.parse(GOLDEN_ANSWER) as object), ...patch });
    expect(refusalOf(() => parseRegisterAnswer(edit({ 备注: 'x' }), expect_))).toBe('备注:unknown_field');
    expect(refusalOf(() => parseRegisterAnswer(edit({ outcome: undefined }), expect_))).toBe(
      'outcome:required',
    );
    expect(refusalOf(() => parseRegisterAnswer(edit({ outcome: 'adopted' }), expect_))).toBe(
      'outcome:must_be_one_of:created|replayed|replaced',
    );
    expect(refusalOf(() => parseRegisterAnswer(edit({ workerId: 'router-beijing' }), expect_))).toBe(
      'workerId:other_worker',
    );
    expect(refusalOf(() => parseRegisterAnswer(edit({ generation: 2 ** 31 }), expect_))).toBe(
      'generation:out_of_range',
    );
    expect(refusalOf(() => parseRegisterAnswer(edit({ maxConcurrentRuns: 1025 }), expect_))).toBe(
      'maxConcurrentRuns:out_of_range',
    );
    expect(refusalOf(() => parseRegisterAnswer(' '.repeat(REGISTER.answerLimit + 1), expect_))).toBe(
      'too_large',
    );
    expect(refusalOf(() => parseRegisterAnswer('{"outcome":"created",', expect_))).toBe('invalid_json');
  });

  it('is v1 as first released, but for the v2 refusals certificate_superseded and protocol_unsupported', () => {
    expect(fieldsAfter(REGISTER, 1, 'request')).toEqual([]);
    expect(fieldsAfter(REGISTER, 1, 'answer')).toEqual([]);
    expect(REGISTER.refusals).toEqual([
      { status: 409, code: 'certificate_superseded', since: 2 },
      { status: 400, code: 'protocol_unsupported', since: 2 },
    ]);
  });

  describe('protocol negotiation (ADR 0060)', () => {
    const base = JSON.parse(GOLDEN_REQUEST) as Record<string, unknown>;

    it('serves 3 (wire v1) and 4 (wire v2); the session keeps the one registered', () => {
      expect(SUPPORTED_PROTOCOL_VERSIONS).toEqual([3, 4]);
      expect(wireVersionOf(3)).toBe(1);
      expect(wireVersionOf(4)).toBe(2);
      expect(wireVersionOf(5)).toBeUndefined();
      expect(parseRegistration({ ...base, protocolVersion: 4 }).protocolVersion).toBe(4);
      // The digest covers the version: a replay with another one is another registration.
      expect(parseRegistration({ ...base, protocolVersion: 4 }).digest).not.toBe(
        parseRegistration(base).digest,
      );
    });

    it.each([
      [2, [3, 4], /offered protocol version 2 .*serves 3\.\.4 \(3: wire v1, 4: wire v2\)/],
      [5, [3, 4], /offered protocol version 5 .*serves 3\.\.4/],
      [3, [4], /offered protocol version 3 .*serves 4 /],
    ])('refuses %p where %p are served with protocol_unsupported naming both', (offered, served, message) => {
      const error = (() => {
        try {
          parseRegistration({ ...base, protocolVersion: offered }, served);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(ProtocolUnsupportedError);
      expect(error).toBeInstanceOf(ValidationError); // nothing is written for it
      expect((error as Error).message).toMatch(message);
    });
  });
});
