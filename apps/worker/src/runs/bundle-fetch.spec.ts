// ADR 0051: an attempt pinning a bundle fetches it in the session chain under its lease fence, runs in
// its copy, and a download that stalls is stopped when the lease is gone (it must not hold the slot).
import { PassThrough, Readable } from 'node:stream';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { bundleOf, craftedBundle, linkChainEntries } from '../../../../test/support/bundle-fixtures';
import { FakeControlPlane } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';
import { IngressCallError } from '../ingress-client/worker-ingress-https.client';

describe('an attempt with a bundle (ADR 0051)', () => {
  let h: WorkerHarness;
  let plane: FakeControlPlane;
  afterEach(() => h?.dispose());

  it('fetches it with its lease fence, runs the command in the working folder of its copy', async () => {
    const b = bundleOf({ 'app/hello.sh': 'echo "hello from $(basename "$PWD")"\n' });
    plane = new FakeControlPlane();
    plane.serveBundle = () => Readable.from([b.content]);
    h = new WorkerHarness(plane);
    await h.lifecycle.start();
    plane.enqueue({ command: 'sh hello.sh', bundle: { digest: b.digest, workdir: 'app' } });
    await h.until('the completion acknowledged', () => h.messages().includes('attempt completed'));
    const lease = plane.leaseList[0]!;
    const fetch = plane.of('bundle')[0]!.body;
    expect(fetch).toMatchObject({ offerId: lease.offerId, leaseToken: lease.token, digest: b.digest });
    expect(lease.completion).toMatchObject({ outcome: 'succeeded' });
    expect(lease.logs.map((l) => l.text).join('')).toBe('hello from app\n');
  });

  it('a working folder the bundle lacks fails the start, naming it (bundle_workdir_missing)', async () => {
    // The control plane refuses such a task (not_a_folder); a revision written before that rule may pin one.
    const b = bundleOf({ 'a/x.sh': 'echo x\n' });
    plane = new FakeControlPlane();
    plane.serveBundle = () => Readable.from([b.content]);
    h = new WorkerHarness(plane);
    await h.lifecycle.start();
    plane.enqueue({ command: 'true', bundle: { digest: b.digest, workdir: 'b' } });
    await h.until('the start failure acknowledged', () => plane.of('start-failure').length > 0);
    expect(plane.of('start-failure')[0]!.body).toMatchObject({ errorCode: 'bundle_workdir_missing' });
    expect(plane.of('running')).toHaveLength(0);
  });

  it('a bundle whose bytes are not its digest fails the start (bundle_unavailable); nothing runs', async () => {
    const b = bundleOf({ 'a.sh': 'echo a\n' });
    plane = new FakeControlPlane();
    plane.serveBundle = () => Readable.from([bundleOf({ 'a.sh': 'echo EVIL\n' }).content]);
    h = new WorkerHarness(plane);
    await h.lifecycle.start();
    plane.enqueue({ command: 'sh a.sh', bundle: { digest: b.digest, workdir: '.' } });
    await h.until('the start failure acknowledged', () => plane.of('start-failure').length > 0);
    expect(plane.of('start-failure')[0]!.body).toMatchObject({ errorCode: 'bundle_unavailable' });
    expect(plane.of('running')).toHaveLength(0);
  });

  it('a bundle whose links lead out through one another (served past any upload check) fails the start; nothing runs', async () => {
    // Issue 27 item 5: the worker applies the rule again while it unpacks, whatever served the bytes.
    const content = craftedBundle(linkChainEntries(true));
    const digest = createHash('sha256').update(content).digest('hex');
    plane = new FakeControlPlane();
    plane.serveBundle = () => Readable.from([content]);
    h = new WorkerHarness(plane);
    await h.lifecycle.start();
    plane.enqueue({ command: 'sh run.sh', bundle: { digest, workdir: 'root/tmp' } });
    await h.until('the start failure acknowledged', () => plane.of('start-failure').length > 0);
    expect(plane.of('start-failure')[0]!.body).toMatchObject({ errorCode: 'bundle_unavailable' });
    expect(plane.of('running')).toHaveLength(0);
    const refused = h.lines.find((l) => l.msg === 'attempt could not start') as Record<string, unknown>;
    expect(refused.error).toMatch(
      /^the bundle breaks an unpack rule: link_out: the link "[^"]+" leads out of the bundle through other links$/,
    );
    expect(h.lines.find((l) => l.msg === 'bundle downloaded')).toBeUndefined();
    expect(existsSync(join(h.root, 'bundles', digest))).toBe(false);
  });

  it('a stalled download ends when the lease is lost: the attempt gives up, reporting nothing more', async () => {
    const b = bundleOf({ 'a.sh': 'echo a\n' });
    plane = new FakeControlPlane(1_500);
    let stalled: PassThrough | undefined;
    // Headers came, then nothing: only the attempt's own stop can end it.
    plane.serveBundle = () => (stalled = new PassThrough());
    plane.reply.renew = () => {
      throw new IngressCallError('renew', 409, 'worker_lease_fenced', 'fenced', 'lease_not_active');
    };
    h = new WorkerHarness(plane);
    await h.lifecycle.start();
    plane.enqueue({ command: 'sh a.sh', bundle: { digest: b.digest, workdir: '.' } });
    await h.until('the attempt given up', () =>
      h.messages().includes('attempt ended without a completion: its lease is gone'),
    );
    expect(stalled!.destroyed).toBe(true);
    expect(plane.of('start-failure')).toHaveLength(0);
    expect(plane.of('running')).toHaveLength(0);
  });
});
