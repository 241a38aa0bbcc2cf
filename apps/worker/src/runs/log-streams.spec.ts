import { FakeControlPlane } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';

let h: WorkerHarness;
let plane: FakeControlPlane;
afterEach(() => h?.dispose());

describe('RunSupervisor: log streams (ADR 0032)', () => {
  it('each chunk carries its stream; the cap marker is system, not the stream that hit the cap (ADR 0032)', async () => {
    plane = new FakeControlPlane();
    h = new WorkerHarness(plane, { QL_WORKER_OUTPUT_MAX_BYTES: '4096' });
    await h.lifecycle.start();
    // stderr first, then stdout past the cap: the marker must not read as the task's stdout.
    plane.enqueue({
      command: "echo to-err >&2; sleep 0.2; echo to-out; head -c 8000 /dev/zero | tr '\\0' x",
    });
    await h.until('the completion', () => plane.leaseList.some((l) => l.completion));
    const logs = plane.leaseList[0]!.logs;
    const of = (stream: string) =>
      logs
        .filter((l) => l.stream === stream)
        .map((l) => l.text)
        .join('');
    expect(new Set(logs.map((l) => l.stream))).toEqual(new Set(['stdout', 'stderr', 'system']));
    expect(of('stderr')).toBe('to-err\n');
    expect(of('stdout')).toMatch(/^to-out\nx+$/);
    expect(of('system')).toMatch(/^\n\[output truncated: the 4096-byte cap was reached\]\n$/);
  });
});
