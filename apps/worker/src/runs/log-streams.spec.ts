import { FakeControlPlane } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';

let h: WorkerHarness;
let plane: FakeControlPlane;
afterEach(() => h?.dispose());

/**
 * The chunks of one run of `command`, by stream. Two pipes are read in whatever order the event loop
 * gets to them, so each case below fills at most one stream past the cap: which stream's bytes were
 * read first when both are written is timing, not a property.
 */
async function streamsOf(command: string): Promise<Record<string, string>> {
  plane = new FakeControlPlane();
  h = new WorkerHarness(plane, { QL_WORKER_OUTPUT_MAX_BYTES: '4096' });
  await h.lifecycle.start();
  plane.enqueue({ command });
  await h.until('the completion', () => plane.leaseList.some((l) => l.completion));
  const out: Record<string, string> = {};
  for (const l of plane.leaseList[0]!.logs)
    out[String(l.stream)] = (out[String(l.stream)] ?? '') + String(l.text);
  return out;
}

const CAP_MARKER = /^\n\[output truncated: the 4096-byte cap was reached\]\n$/;

describe('RunSupervisor: log streams (ADR 0032)', () => {
  it('each chunk carries the stream it was written to', async () => {
    expect(await streamsOf('echo to-err >&2; echo to-out')).toEqual({
      stderr: 'to-err\n',
      stdout: 'to-out\n',
    });
  });

  it.each(['stdout', 'stderr'])(
    'the cap marker is system, not %s, the stream that hit the cap',
    async (stream) => {
      const redirect = stream === 'stderr' ? ' >&2' : '';
      const got = await streamsOf(`head -c 8000 /dev/zero | tr '\\0' x${redirect}`);
      expect(Object.keys(got).sort()).toEqual([stream, 'system'].sort());
      expect(got[stream]).toMatch(/^x{4096}$/);
      expect(got.system).toMatch(CAP_MARKER);
    },
  );
});
