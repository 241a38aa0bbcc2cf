import { DispatchSuite, RUN_LEASE, offered } from './dispatch.contract';

/**
 * Issue 20, part of the dispatch contract: the runs list filtered by worker (`?workerId=`, the console's
 * worker page) holds every run with an attempt on that worker, once, newest first, under the same keyset
 * as the unfiltered list and combined with the other filters.
 */
export function describeRunsByWorker(suite: DispatchSuite): void {
  describe('runs by worker', () => {
    it('lists the runs any attempt of which ran on the worker, once each, newest first, with paging and the other filters', async () => {
      const { f, target } = suite;
      const [a, b] = [await f.worker(suite.workerId('a')), await f.worker(suite.workerId('b'))];
      const retried = await f.task({ retry: { maxAttempts: 3, initialBackoffMs: 1_000 } });
      const [x, w] = await f.queue(retried.id, 2);
      // Both first attempts on `a` are lost; the second attempts go to `b` (x) and `a` again (w).
      for (const offer of [offered(await f.pull(a)), offered(await f.pull(a))])
        await f.markStarted(offer.attempt.id);
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ lost: 2 });
      target.clock.advance(1_000);
      expect(await f.leases.sweep(64)).toMatchObject({ retried: 2 });
      expect(offered(await f.pull(b)).attempt).toMatchObject({ runId: x!.id, attemptNo: 2 });
      expect(offered(await f.pull(a)).attempt).toMatchObject({ runId: w!.id, attemptNo: 2 });
      const other = await f.task();
      const [y] = await f.queue(other.id, 1);
      expect(offered(await f.pull(a)).attempt).toMatchObject({ runId: y!.id });
      await f.queue(other.id, 1); // queued: no attempt, on no worker's list

      const ids = async (query: Record<string, unknown>) =>
        (await f.runs.list({ limit: 200, ...query })).map((r) => r.id);
      expect(await ids({ workerId: a.workerId })).toEqual([y!.id, w!.id, x!.id]);
      expect(await ids({ workerId: b.workerId })).toEqual([x!.id]);
      expect(await ids({ workerId: a.workerId, taskId: retried.id })).toEqual([w!.id, x!.id]);
      expect(await ids({ workerId: b.workerId, taskId: other.id })).toEqual([]);
      expect(await ids({ workerId: a.workerId, status: 'queued' })).toEqual([]);
      expect(await ids({ workerId: 'no-such-worker' })).toEqual([]);
      // The keyset: pages of 2, then the rest, then nothing.
      expect(await ids({ workerId: a.workerId, limit: 2 })).toEqual([y!.id, w!.id]);
      expect(await ids({ workerId: a.workerId, limit: 2, before: w!.id })).toEqual([x!.id]);
      expect(await ids({ workerId: a.workerId, limit: 2, before: x!.id })).toEqual([]);
    });
  });
}
