// ADR 0044 (issue 17 item 3): a real worker process over mTLS sends the output still queued when its
// run ended on the completion instead of `logs` calls of their own; output past what one completion
// carries goes as `logs` calls first. The calls are counted by the control plane's own /metrics.
import { prometheusSamples } from '../support/prometheus-text';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';

// Real worker processes: a start takes seconds on a loaded machine.
jest.setTimeout(180_000);

const route = (action: string) =>
  `ql_http_request_duration_seconds_count{listener="ingress",route="/api/v3/worker-ingress/workers/:workerId/sessions/:sessionId/${action}",method="POST",status="200"}`;

describe.each<Dialect>(['sqlite', 'postgres'])('the last output rides on the completion (%s)', (dialect) => {
  let h: RemoteRunHarness;
  let worker: RunWorker;

  beforeAll(async () => {
    h = await RemoteRunHarness.start(dialect, ['worker-a']);
    // Output waits up to 30 s for its run's end: whatever a short run prints is still queued then.
    worker = h.startWorker('worker-a', { env: { QL_WORKER_LOG_LINGER_MS: '30000' } });
    await h.untilOnline(worker);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Answered ingress calls so far, by action. */
  const answered = async () => {
    const samples = prometheusSamples((await h.t.admin('GET', '/metrics')).raw);
    return { logs: samples.get(route('logs')) ?? 0, completion: samples.get(route('completion')) ?? 0 };
  };

  /** Runs a shell command to its end; the ingress calls it made, its log and the worker's `attempt completed` line. */
  async function run(command: string) {
    const before = await answered();
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command }));
    const ended = await h.untilRunEnds(runId);
    const finished = await worker.until('attempt completed', async () =>
      worker.lines.find((l) => l.msg === 'attempt completed' && l.runId === runId),
    );
    const after = await answered();
    const calls = { logs: after.logs - before.logs, completion: after.completion - before.completion };
    return { ended, finished, calls, log: await h.logs(runId), runId };
  }

  it('a run printing two short lines makes no logs call; the run log shows both, in order, with their streams', async () => {
    const { ended, finished, calls, log } = await run('echo "line one"; echo "line two" >&2');
    expect(ended.status).toBe('succeeded');
    expect(calls).toEqual({ logs: 0, completion: 1 });
    expect(log.items.map((i) => [i.seq, i.stream, i.text])).toEqual([
      [0, 'stdout', 'line one\n'],
      [1, 'stderr', 'line two\n'],
    ]);
    expect({ logChunks: finished.logChunks, finalLogChunks: finished.finalLogChunks }).toEqual({
      logChunks: 2,
      finalLogChunks: 2,
    });
  });

  it('a run printing more than a completion carries gets all its output in order: the earlier chunks as logs calls, the rest on the completion', async () => {
    // 40 lines of 3 000 bytes on stdout (120 KB: more than one completion carries), then one line on each stream.
    const command =
      'i=0; while [ $i -lt 40 ]; do printf "line %02d %s\\n" $i "$(head -c 3000 /dev/zero | tr "\\0" y)"; ' +
      'i=$((i+1)); done; echo "err tail" >&2; echo "out tail"';
    const { ended, finished, calls, log, runId } = await run(command);
    expect(ended.status).toBe('succeeded');
    const lines = Array.from(
      { length: 40 },
      (_, i) => `line ${String(i).padStart(2, '0')} ${'y'.repeat(3000)}\n`,
    );
    expect(await h.output(runId, 'stdout')).toBe(`${lines.join('')}out tail\n`);
    expect(await h.output(runId, 'stderr')).toBe('err tail\n');
    expect(log.items.map((i) => i.seq)).toEqual(log.items.map((_, i) => i));
    expect(log.items.every((i) => i.kind === 'output')).toBe(true);
    const final = finished.finalLogChunks as number;
    expect(final).toBeGreaterThan(0);
    expect(calls.logs).toBeGreaterThan(0);
    expect({ logChunks: finished.logChunks, logsCalls: calls.logs, completion: calls.completion }).toEqual({
      logChunks: log.items.length,
      logsCalls: log.items.length - final,
      completion: 1,
    });
  });
});
