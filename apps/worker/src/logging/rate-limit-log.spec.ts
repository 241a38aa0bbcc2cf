import { IngressCallError } from '../ingress-client/worker-ingress-https.client';
import { rateLimited } from '../../test-support/fake-control-plane';
import { RateLimitLog } from './rate-limit-log';
import { JsonLineLog } from './worker-log';

describe('RateLimitLog: one warning per burst of 429s (ADR 0042)', () => {
  let now: number;
  let lines: Array<Record<string, unknown>>;
  let burst: RateLimitLog;
  beforeEach(() => {
    now = 0;
    lines = [];
    burst = new RateLimitLog(
      new JsonLineLog('debug', (l) => lines.push(JSON.parse(l) as Record<string, unknown>)),
      () => now,
      5_000,
    );
  });
  const levels = () => lines.map((l) => `${String(l.level)} ${String(l.msg)}`);

  it('warns at the first 429, counts the rest, and says it is over, with the count, at the first answer after a quiet spell', () => {
    burst.failed('starting', rateLimited(1000));
    now += 300;
    burst.failed('offers', rateLimited(1000));
    burst.answered(); // a call that passed between refusals: the same burst
    now += 1_000;
    burst.failed('heartbeat', rateLimited(1000));
    now += 4_999;
    burst.answered();
    expect(levels()).toEqual([
      'warn control plane rate-limits this worker; its calls wait as Retry-After says',
    ]);
    expect(lines[0]).toMatchObject({ action: 'starting', retryAfterMs: 1000 });
    now += 1;
    burst.answered();
    burst.answered();
    expect(levels()).toEqual([
      'warn control plane rate-limits this worker; its calls wait as Retry-After says',
      'info control plane rate limit over',
    ]);
    expect(lines[1]).toMatchObject({ refusals: 3, limitedForMs: 1_300 });
    // The next burst is a new one: its own warning.
    burst.failed('completion', rateLimited(1000));
    expect(levels()).toHaveLength(3);
  });

  it('a call without an answer tells nothing; another refusal (a 409, a 503) is an answer that may end the burst', () => {
    burst.failed('running', rateLimited(1000));
    now += 10_000;
    burst.failed('running', new IngressCallError('running', 0, 'transport_error', 'reset'));
    expect(lines).toHaveLength(1);
    burst.failed('running', new IngressCallError('running', 503, 'worker_ingress_unavailable', 'down'));
    expect(lines[1]).toMatchObject({ msg: 'control plane rate limit over', refusals: 1 });
    burst.failed('running', new Error('not an ingress answer'));
    expect(lines).toHaveLength(2);
  });
});
