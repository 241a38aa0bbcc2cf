// ADR 0044 (issue 17 item 3): the output still queued when the process ended rides on the completion,
// up to one logs body; what does not fit goes as `logs` calls first, in order.
import { COMPLETION_FINAL_LOGS_BYTES } from '@ql/contracts';
import { RUN_LOG_LIMITS } from '@ql/domain';
import { FakeControlPlane } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';
import { finalTailStart } from './final-logs';
import { LogText } from './output-text';

describe('finalTailStart: the tail of the queue a completion carries', () => {
  const out = (text: string): LogText => ({ stream: 'stdout', text });

  it('takes everything that fits, nothing of an empty queue', () => {
    expect(finalTailStart([], 0)).toBe(0);
    expect(finalTailStart([out('a\n'), { stream: 'stderr', text: 'b\n' }], 7)).toBe(0);
  });

  it(`at most ${RUN_LOG_LIMITS.finalChunks} chunks: the earlier ones go as logs calls`, () => {
    const queued = Array.from({ length: RUN_LOG_LIMITS.finalChunks + 3 }, (_, i) => out(`${i}\n`));
    expect(finalTailStart(queued, 0)).toBe(3);
  });

  it("texts together at most one chunk's bytes", () => {
    const half = 'x'.repeat(RUN_LOG_LIMITS.chunkBytes / 2);
    expect(finalTailStart([out(half), out(half)], 0)).toBe(0);
    expect(finalTailStart([out(half), out(half), out('y')], 0)).toBe(1);
    expect(finalTailStart([out(`${half}é`), out(half)], 0)).toBe(1); // é is two bytes
  });

  it('its JSON, seqs and escapes included, within the completion’s share of its body', () => {
    // 12 KiB of ESC is 72 KiB of JSON (\u001b): it fits no completion and goes as a logs call.
    const escapes = '\u001b'.repeat(12 * 1024);
    expect(finalTailStart([out(escapes)], 0)).toBe(1);
    // 10 KiB of ESC (60 KiB of JSON) fits alone; a chunk of 4 KiB of plain text beside it does not.
    const fits = '\u001b'.repeat(10 * 1024);
    expect(finalTailStart([out(fits)], 0)).toBe(0);
    expect(finalTailStart([out('z'.repeat(4096)), out(fits)], 0)).toBe(1);
    const json = JSON.stringify({ finalLogs: [{ seq: 0, stream: 'stdout', text: fits }] });
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(COMPLETION_FINAL_LOGS_BYTES);
  });
});

describe('RunSupervisor: the last output rides on the completion (ADR 0044)', () => {
  let h: WorkerHarness;
  let plane: FakeControlPlane;
  afterEach(() => h?.dispose());

  /** Runs `command` to its completion; its lease, the lease calls in order and the completion's body. */
  async function run(command: string, lingerMs: number) {
    plane = new FakeControlPlane();
    h = new WorkerHarness(plane, { QL_WORKER_LOG_LINGER_MS: String(lingerMs) });
    await h.lifecycle.start();
    plane.enqueue({ command });
    await h.until('the completion acknowledged', () => h.messages().includes('attempt completed'));
    const lease = plane.leaseList[0]!;
    const calls = plane.calls.filter((c) => c.body.offerId === lease.offerId && c.action !== 'renew');
    const completion = plane.of('completion')[0]!.body;
    const finished = h.lines.find((l) => l.msg === 'attempt completed')!;
    return { lease, actions: calls.map((c) => c.action), calls, completion, finished };
  }

  it('a run printing two short lines makes no logs call: both ride on the completion, in order, with their streams', async () => {
    const { lease, actions, completion, finished } = await run('echo one; echo two >&2', 30_000);
    expect(actions).toEqual(['offers', 'starting', 'running', 'completion']);
    expect(completion.finalLogs).toEqual([
      { seq: 0, stream: 'stdout', text: 'one\n' },
      { seq: 1, stream: 'stderr', text: 'two\n' },
    ]);
    expect(lease.logs).toEqual(completion.finalLogs);
    expect(lease.completion).toEqual({ outcome: 'succeeded', exitCode: 0, errorSummary: null });
    expect({ logChunks: finished.logChunks, finalLogChunks: finished.finalLogChunks }).toEqual({
      logChunks: 2,
      finalLogChunks: 2,
    });
  });

  it('a run that prints nothing sends a completion without finalLogs', async () => {
    const { actions, completion, finished } = await run('true', 30_000);
    expect(actions).toEqual(['offers', 'starting', 'running', 'completion']);
    expect(completion).not.toHaveProperty('finalLogs');
    expect(finished.logChunks).toBe(0);
  });

  it('output of a run that goes on is uploaded after its linger; what came last rides on the completion', async () => {
    const { lease, actions, completion } = await run('echo first; sleep 2; echo last', 100);
    expect(actions).toEqual(['offers', 'starting', 'running', 'logs', 'completion']);
    expect(completion.finalLogs).toEqual([{ seq: 1, stream: 'stdout', text: 'last\n' }]);
    expect(lease.logs.map((l) => l.text)).toEqual(['first\n', 'last\n']);
  });

  it('more than a completion carries: the earlier chunks go as logs calls at once, the rest on the completion, all in order', async () => {
    // 150 000 bytes on stdout (several chunks), then a line on stderr, then one on stdout (two pipes:
    // how the streams interleave is the reads' timing, so each stream is checked on its own).
    const command = "head -c 150000 /dev/zero | tr '\\0' x; echo; echo err-line >&2; echo out-line";
    const { lease, actions, calls, completion, finished } = await run(command, 30_000);
    const final = completion.finalLogs as { seq: number; stream: string; text: string }[];
    const logCalls = calls.filter((c) => c.action === 'logs');
    expect(logCalls.length).toBeGreaterThan(0);
    expect(actions).toEqual(['offers', 'starting', 'running', ...logCalls.map(() => 'logs'), 'completion']);
    // The logs calls numbered 0 … n-1, the completion's chunks n …; together the whole output.
    expect(logCalls.map((c) => c.body.seq)).toEqual(logCalls.map((_, i) => i));
    expect(final.map((c) => c.seq)).toEqual(final.map((_, i) => logCalls.length + i));
    expect(lease.logs.map((l) => l.seq)).toEqual(lease.logs.map((_, i) => i));
    const text = (stream: string) =>
      lease.logs
        .filter((l) => l.stream === stream)
        .map((l) => l.text)
        .join('');
    expect(text('stdout')).toBe(`${'x'.repeat(150_000)}\nout-line\n`);
    expect(text('stderr')).toBe('err-line\n');
    // Within the bound the control plane checks.
    expect(final.length).toBeLessThanOrEqual(RUN_LOG_LIMITS.finalChunks);
    expect(final.reduce((n, c) => n + Buffer.byteLength(c.text), 0)).toBeLessThanOrEqual(
      RUN_LOG_LIMITS.chunkBytes,
    );
    expect({ logChunks: finished.logChunks, finalLogChunks: finished.finalLogChunks }).toEqual({
      logChunks: lease.logs.length,
      finalLogChunks: final.length,
    });
  });
});
