import { RUN_LOG_LIMITS, ValidationError } from '@ql/domain';
import { LOGS, buildLogsRequest, parseLogsAnswer, parseLogsRequest, readLogChunk } from './logs';
import { fieldsAfter } from './call';
import { refusalOf } from './golden';

const fence = { generation: 3, expectedVersion: 12 };
const lease = {
  offerId: '01938e1e-0000-7000-8000-00000000f101',
  leaseToken: 'Ww'.repeat(22),
  leaseGeneration: 2,
  leaseVersion: 7,
};

describe('logs (ingress/logs.ts)', () => {
  it('builds the golden body, with and without a stream, and the control plane reads it', () => {
    const text = '京东签到: 成功 ✔\n\u001b[32m豆子 +5\u001b[0m\n';
    const body = buildLogsRequest(fence, { ...lease, text, stream: 'stdout', seq: 4 });
    expect(JSON.stringify(body)).toBe(
      `{"generation":3,"expectedVersion":12,"offerId":"${lease.offerId}","leaseToken":"${lease.leaseToken}","leaseGeneration":2,"leaseVersion":7,` +
        `"seq":4,"stream":"stdout","text":${JSON.stringify(text)}}`,
    );
    expect(parseLogsRequest(body)).toEqual(body);
    const v1 = buildLogsRequest(fence, { ...lease, seq: 0, text: '开始' });
    expect(Object.keys(v1).slice(-2)).toEqual(['seq', 'text']);
    expect(parseLogsRequest(v1)).toEqual({ ...v1, stream: null });
  });

  it('refuses unknown fields and the chunk’s bad values', () => {
    const body = buildLogsRequest(fence, { ...lease, seq: 0, stream: 'stderr', text: '错误' });
    expect(refusalOf(() => parseLogsRequest({ ...body, fd: 2 }))).toBe('fd: unknown_field');
    expect(refusalOf(() => parseLogsRequest({ ...body, stream: 'unknown' }))).toBe(
      'stream: must_be_one_of:stdout|stderr|system',
    );
    expect(refusalOf(() => parseLogsRequest({ ...body, seq: RUN_LOG_LIMITS.maxSeq + 1 }))).toBe(
      'seq: out_of_range',
    );
  });

  it('reads the golden answer and refuses anything else', () => {
    expect(parseLogsAnswer('{"outcome":"stored","truncated":false}')).toEqual({
      outcome: 'stored',
      truncated: false,
    });
    expect(parseLogsAnswer(Buffer.from('{"outcome":"dropped","truncated":true}')).outcome).toBe('dropped');
    expect(refusalOf(() => parseLogsAnswer('{"outcome":"stored","truncated":false,"runId":"x"}'))).toBe(
      'runId:unknown_field',
    );
    expect(refusalOf(() => parseLogsAnswer('{"outcome":"kept","truncated":false}'))).toBe(
      'outcome:must_be_one_of:stored|replayed|dropped',
    );
    expect(refusalOf(() => parseLogsAnswer('{"outcome":"stored","truncated":"否"}'))).toBe(
      'truncated:must_be_boolean',
    );
    expect(refusalOf(() => parseLogsAnswer(' '.repeat(LOGS.answerLimit + 1)))).toBe('too_large');
  });

  it('records the stream as v2', () => {
    expect(fieldsAfter(LOGS, 1, 'request')).toEqual(['stream']);
    expect(fieldsAfter(LOGS, 1, 'answer')).toEqual([]);
  });
});

describe('readLogChunk: run output as the task wrote it, with its stream (ADR 0032)', () => {
  it('keeps ESC, CR, bidi and zero-width characters and every stream of LOG_STREAMS', () => {
    const text = 'a\u001b[31mred\r\u202egnp.exe\u200b\u0007\t\n';
    for (const stream of ['stdout', 'stderr', 'system'] as const)
      expect(readLogChunk({ seq: 1, stream, text })).toEqual({ seq: 1, stream, text });
    expect(readLogChunk({ seq: 0, text: 'line\r\n\tnext' })).toEqual({
      seq: 0,
      stream: null,
      text: 'line\r\n\tnext',
    });
  });

  it.each([
    [{ stream: 'STDOUT' }, 'stream: must_be_one_of:stdout|stderr|system'],
    [{ stream: 'unknown' }, 'stream: must_be_one_of:stdout|stderr|system'],
    [{ stream: null }, 'stream: must_be_one_of:stdout|stderr|system'],
    [{ stream: 1 }, 'stream: must_be_one_of:stdout|stderr|system'],
    [{ text: 'a\u0000b' }, 'text: control_character'],
    [{ text: 'half \ud83d' }, 'text: unpaired_surrogate'],
    [{ text: '\ude00 half' }, 'text: unpaired_surrogate'],
    [{ seq: -1 }, 'seq: out_of_range'],
    [{ text: 'é'.repeat(30 * 1024 + 1) }, 'text: too_long'],
  ])('%# refuses %j', (change, message) => {
    const call = () => readLogChunk({ seq: 0, stream: 'stdout', text: 'x', ...change });
    expect(call).toThrow(ValidationError);
    expect(call).toThrow(message);
  });
});
