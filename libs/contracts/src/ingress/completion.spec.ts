import { RUN_LOG_LIMITS, ValidationError, stepDigest } from '@ql/domain';
import {
  COMPLETION,
  buildCompletionRequest,
  parseCompletionRequest,
  readCompletion,
  readFinalLogs,
} from './completion';
import { fieldsAfter } from './call';
import { refusalOf } from './golden';

const fence = { generation: 3, expectedVersion: 12 };
const lease = {
  offerId: '01938e1e-0000-7000-8000-00000000f201',
  leaseToken: 'Ee'.repeat(22),
  leaseGeneration: 2,
  leaseVersion: 7,
};
const FENCE_JSON = `"generation":3,"expectedVersion":12,"offerId":"${lease.offerId}","leaseToken":"${lease.leaseToken}","leaseGeneration":2,"leaseVersion":7`;

describe('completion (ingress/completion.ts)', () => {
  it('builds the golden bodies in wire order: the v1 one, and one with the v2 fields', () => {
    const v1 = buildCompletionRequest(fence, {
      ...lease,
      errorSummary: null,
      exitCode: 0,
      outcome: 'succeeded',
    });
    expect(JSON.stringify(v1)).toBe(`{${FENCE_JSON},"outcome":"succeeded","exitCode":0,"errorSummary":null}`);
    const finalLogs = [{ seq: 5, stream: 'stdout' as const, text: '签到完成\n' }];
    const v2 = buildCompletionRequest(fence, {
      ...lease,
      finalLogs,
      executorHandle: 'pid:77',
      errorSummary: '退出码 1',
      exitCode: 1,
      outcome: 'failed',
    });
    expect(JSON.stringify(v2)).toBe(
      `{${FENCE_JSON},"outcome":"failed","exitCode":1,"errorSummary":"退出码 1","executorHandle":"pid:77",` +
        '"finalLogs":[{"seq":5,"stream":"stdout","text":"签到完成\\n"}]}',
    );
    const none = buildCompletionRequest(fence, {
      ...lease,
      outcome: 'cancelled',
      exitCode: null,
      finalLogs: [],
    });
    expect(JSON.stringify(none)).toBe(`{${FENCE_JSON},"outcome":"cancelled","exitCode":null}`);
  });

  it('the control plane reads them: no finalLogs is none', () => {
    const body = buildCompletionRequest(fence, {
      ...lease,
      outcome: 'timed_out',
      exitCode: null,
      errorSummary: null,
    });
    expect(parseCompletionRequest(body)).toEqual({ ...body, finalLogs: [] });
    expect(refusalOf(() => parseCompletionRequest({ ...body, 结果: 1 }))).toBe('结果: unknown_field');
    expect(refusalOf(() => parseCompletionRequest({ ...body, executorHandle: 'pid 1' }))).toBe(
      'executorHandle: invalid_format',
    );
  });

  it('records executorHandle and finalLogs, and the answer’s grace, as v2; the body limit', () => {
    expect(fieldsAfter(COMPLETION, 1, 'request').sort()).toEqual(['executorHandle', 'finalLogs']);
    expect(fieldsAfter(COMPLETION, 1, 'answer')).toEqual(['snapshot.deadlineGraceMs']);
    expect(fieldsAfter(COMPLETION, 2, 'request')).toEqual([]);
    expect(COMPLETION.bodyLimit).toBe(68 * 1024);
  });

  it.each([
    [
      () => readCompletion({ outcome: 'done' }),
      'outcome: must_be_one_of:succeeded|failed|timed_out|cancelled',
    ],
    [() => readCompletion({ outcome: 'failed', exitCode: 1.5 }), 'exitCode: must_be_integer'],
    [() => readCompletion({ outcome: 'failed', exitCode: 2 ** 31 }), 'exitCode: out_of_range'],
    [() => readCompletion({ outcome: 'failed', errorSummary: 'a\nb' }), 'errorSummary: control_character'],
    [() => readCompletion({ outcome: 'failed', errorSummary: 'é'.repeat(513) }), 'errorSummary: too_long'],
  ])('%# refuses bad input: %s', (call, message) => {
    expect(call).toThrow(ValidationError);
    expect(call).toThrow(message);
  });

  it('accepts the bounds', () => {
    expect(
      readCompletion({ outcome: 'failed', exitCode: -(2 ** 31), errorSummary: 'é'.repeat(512) }),
    ).toMatchObject({
      exitCode: -(2 ** 31),
    });
  });
});

describe('readFinalLogs: the output a completion carries (ADR 0044)', () => {
  const chunk = (seq: number, text = 'x', stream = 'stdout') => ({ seq, stream, text });

  it('absent or empty is none; chunks keep their order, seqs and streams as sent', () => {
    expect(readFinalLogs(undefined)).toEqual([]);
    expect(readFinalLogs([])).toEqual([]);
    const raw = [chunk(3, 'a\u001b[31m\r\n'), chunk(4, 'b', 'stderr'), chunk(5, 'c', 'system')];
    expect(readFinalLogs(raw)).toEqual(raw);
  });

  it.each<[string, unknown, string]>([
    ['not an array', { seq: 0 }, 'finalLogs: must_be_array'],
    [
      'too many chunks',
      Array.from({ length: RUN_LOG_LIMITS.finalChunks + 1 }, (_, i) => chunk(i)),
      'finalLogs: too_many_items',
    ],
    ['a chunk that is no object', [chunk(0), 'x'], 'finalLogs[1]: must_be_object'],
    ['an unknown field', [{ ...chunk(0), fd: 1 }], 'finalLogs[0].fd: unknown_field'],
    ['no stream', [{ seq: 0, text: 'x' }], 'finalLogs[0].stream: must_be_one_of:stdout|stderr|system'],
    ['a NUL', [chunk(0, 'a\u0000')], 'finalLogs[0].text: control_character'],
    ['a bad seq', [chunk(-1)], 'finalLogs[0].seq: out_of_range'],
    [
      'texts over one chunk together',
      [chunk(0, 'x'.repeat(RUN_LOG_LIMITS.chunkBytes - 1)), chunk(1, 'é')],
      'finalLogs: too_long',
    ],
  ])('refuses %s', (_what, raw, message) => {
    expect(() => readFinalLogs(raw)).toThrow(ValidationError);
    expect(() => readFinalLogs(raw)).toThrow(message);
  });

  it('a completion without them has the digest it had before them; with them, another', () => {
    const ending = { step: 'completion', outcome: 'succeeded', exitCode: 0, errorSummary: null } as const;
    expect(stepDigest({ ...ending, finalLogs: undefined })).toBe(stepDigest(ending));
    expect(stepDigest({ ...ending, finalLogs: [{ seq: 0, stream: 'stdout', text: 'x' }] })).not.toBe(
      stepDigest(ending),
    );
  });
});
