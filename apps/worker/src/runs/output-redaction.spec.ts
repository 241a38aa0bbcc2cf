import { OutputText } from './output-text';
import { OutputLimiter } from '../executor/output-limiter';
import { fetchSecrets, readSecretsAnswer, secretValuesToRedact } from './attempt-secrets';
import { IngressCallError } from '../ingress-client/worker-ingress-https.client';
import type { LeaseChannel } from './lease-channel';
import type { ExecutionOffer } from '@ql/contracts';
import { parseTaskSpec } from '@ql/domain';

const SECRET = 'pt_key=é-secret-€;';

/** The texts of `bytes` cut into two chunks at `cut`, per stream, joined (the ended output included). */
function through(text: OutputText, bytes: Buffer, cut: number): string {
  const out = [
    ...text.texts({ seq: 0, stream: 'stdout', data: bytes.subarray(0, cut), truncated: false }),
    ...text.texts({ seq: 1, stream: 'stdout', data: bytes.subarray(cut), truncated: false }),
    ...text.end(),
  ];
  return out.map((t) => t.text).join('');
}

describe('the worker redacts an attempt’s secret values from its output (ADR 0050)', () => {
  it('wherever a chunk boundary falls, inside a multi-byte character too, the value is *** and nothing else changes', () => {
    const bytes = Buffer.from(`before ${SECRET} middle ${SECRET}\nafter`);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const text = new OutputText();
      text.redact([SECRET]);
      expect(through(text, bytes, cut)).toBe('before *** middle ***\nafter');
    }
  });

  it('the cap’s marker comes after what the redaction held back, which it hides: the cut may be inside a value', () => {
    const text = new OutputText();
    text.redact([SECRET]);
    const first = text.texts({
      seq: 0,
      stream: 'stdout',
      data: Buffer.from(`x ${SECRET.slice(0, 4)}`),
      truncated: false,
    });
    const marker = text.texts({
      seq: 1,
      stream: 'stdout',
      data: Buffer.from('[truncated]'),
      truncated: true,
    });
    expect(first).toEqual([{ stream: 'stdout', text: 'x ' }]); // only a value's start is held
    expect(marker).toEqual([
      { stream: 'stdout', text: '***' },
      { stream: 'system', text: '[truncated]' },
    ]);
    expect(text.end()).toEqual([]);
  });

  it('a per-run cap that falls inside a value lets none of it out, on either stream (issue 27 item 2)', () => {
    const value = 'ghp_0123456789abcdefghijklmnopq'; // 31 characters
    const texts: string[] = [];
    const output = new OutputText();
    output.redact([value]);
    const limiter = new OutputLimiter(22 + 2 + 30, 1024, (chunk) =>
      texts.push(...output.texts(chunk).map((t) => t.text)),
    );
    limiter.push('stderr', Buffer.from(`e ${value.slice(0, 20)}`));
    limiter.push('stdout', Buffer.from(`o ${value}`)); // the cap falls after its 30th character
    texts.push(...output.end().map((t) => t.text));
    const all = texts.join('');
    expect(all).not.toContain(value.slice(0, 4));
    expect(texts.filter((t) => t.includes('***'))).toHaveLength(2);
    expect(all).toMatch(/^(e |o )+\*\*\*\*\*\*\n\[output truncated: the 54-byte cap was reached\]\n$/);
  });

  it('without values nothing is held back', () => {
    const text = new OutputText();
    expect(text.texts({ seq: 0, stream: 'stderr', data: Buffer.from(SECRET), truncated: false })).toEqual([
      { stream: 'stderr', text: SECRET },
    ]);
    expect(text.end()).toEqual([]);
  });

  it('redacts each secret of a joined mapping too, and reads the answer strictly', () => {
    const { spec } = parseTaskSpec({
      name: 't',
      command: 'x',
      runtime: 'shell',
      secretEnv: { JD_COOKIE: 'a&b', ONE: 'c' },
    });
    expect(secretValuesToRedact(spec, { JD_COOKIE: 'A1&B2', ONE: 'C&D' }).sort()).toEqual([
      'A1',
      'A1&B2',
      'B2',
      'C&D',
    ]);
    const answer = (body: unknown) => Buffer.from(JSON.stringify(body));
    const attemptId = '01938e1e-0000-7000-8000-000000000001';
    expect(
      readSecretsAnswer(answer({ attemptId, env: { JD_COOKIE: 'v', ONE: 'w' } }), attemptId, spec),
    ).toEqual({
      JD_COOKIE: 'v',
      ONE: 'w',
    });
    const refusal = (body: unknown) => {
      try {
        readSecretsAnswer(answer(body), attemptId, spec);
        return 'accepted';
      } catch (error) {
        return (error as Error).message;
      }
    };
    expect(refusal({ attemptId: 'other', env: { JD_COOKIE: 'v', ONE: 'w' } })).toBe(
      'attemptId: other_attempt',
    );
    expect(refusal({ attemptId, env: { JD_COOKIE: 'v' } })).toBe('env: not_the_mapped_names');
    expect(refusal({ attemptId, env: { JD_COOKIE: 'v', ONE: 5 } })).toBe('env.ONE: invalid_value');
    expect(refusal({ attemptId, env: { JD_COOKIE: 'v', ONE: 'w' }, extra: 1 })).toBe('extra: unknown_field');
    // No refusal names a value.
    expect(refusal({ attemptId, env: { JD_COOKIE: 'secret-v', ONE: 7 } })).not.toContain('secret-v');
  });

  it('a 422 for a run being cancelled is the start failure cancel_requested; any other 422 is secrets_unavailable', async () => {
    const { spec } = parseTaskSpec({ name: 't', command: 'x', runtime: 'shell', secretEnv: { ONE: 'c' } });
    const offer = { execution: { spec }, run: { attemptId: 'a1' } } as unknown as ExecutionOffer;
    const lease = { offerId: 'o', leaseToken: 't', leaseGeneration: 1, leaseVersion: 0, termEndMs: Infinity };
    const term = { retryMs: 1, signal: new AbortController().signal };
    const refusing = (reason: string) =>
      ({
        leaseCall: () =>
          Promise.reject(new IngressCallError('secrets', 422, 'secrets_unavailable', 'refused', reason)),
      }) as unknown as LeaseChannel;
    expect(await fetchSecrets(refusing('cancel_requested'), lease, term, offer)).toEqual({
      refused: 'cancel_requested',
    });
    expect(await fetchSecrets(refusing('secret_missing'), lease, term, offer)).toEqual({
      refused: 'secrets_unavailable',
    });
    const serving = { leaseCall: () => Promise.resolve({ ONE: 'v' }) } as unknown as LeaseChannel;
    expect(await fetchSecrets(serving, lease, term, offer)).toEqual({ env: { ONE: 'v' } });
  });
});
