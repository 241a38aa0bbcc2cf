import { DispatchSuite, expectFence, newToken, offered } from './dispatch.contract';

/**
 * ADR 0027, part of the dispatch contract: claims that arrive together at one replica. On PostgreSQL
 * the ones queued behind busy claim statements share one statement (one `ql_claim` each); on SQLite
 * each claim is its own transaction. Either way each puller gets its own answer: its own run, its own
 * fence refusal, its own replay.
 */
/** `n` sessions of one capabilities document, each past its first claim (the steady state). */
async function warmSessions(suite: DispatchSuite, n: number) {
  const { f } = suite;
  const task = await f.task();
  await f.queue(task.id, n);
  const workers = [];
  for (let i = 0; i < n; i++) {
    const worker = await f.worker(suite.workerId('batch'), 4);
    offered(await f.pull(worker));
    workers.push(worker);
  }
  return { task, workers };
}

export function describeClaimBatch(suite: DispatchSuite): void {
  describe('claims arriving together', () => {
    it('each puller gets its own run, in its own name; on PostgreSQL the queued claims share one statement', async () => {
      const { f } = suite;
      const { task, workers } = await warmSessions(suite, 16);
      await f.queue(task.id, 20);
      const before = f.db.statements.value;
      // Sent in the reverse of worker-id order: the batch runs in worker-id order (ADR 0027), so a
      // mix-up between a claim's position and its answer would hand an offer to another puller.
      const pullers = [...workers].reverse();
      const results = await Promise.all(pullers.map((w) => f.pull(w)));
      const statements = f.db.statements.value - before;
      const offers = results.map(offered);
      // What each puller was told is what the database holds under its offer id, in its name.
      for (const [i, offer] of offers.entries()) {
        const lease = await f.db.one<Record<string, unknown>>(
          'SELECT worker_id, session_id, run_id, attempt_id FROM run_leases WHERE offer_id = :id',
          { id: offer.lease.offerId },
        );
        expect(lease).toEqual({
          worker_id: pullers[i]!.workerId,
          session_id: pullers[i]!.sessionId,
          run_id: offer.run.id,
          attempt_id: offer.attempt.id,
        });
      }
      expect(new Set(offers.map((o) => o.run.id)).size).toBe(16);
      expect(await f.count('run_leases', `state = 'active'`)).toBe(32);
      expect(await f.count('runs', `status = 'queued'`)).toBe(4);
      // PostgreSQL: the first claim goes out at once, alone; the 15 that queued behind it go together
      // as soon as it returns. SQLite: every claim is its own transaction.
      if (f.db.dialect === 'postgres') expect(statements).toBe(2);
      else expect(statements).toBeGreaterThanOrEqual(16 * 8);
    });

    it('pullers that pull again as soon as they are answered ride together in the next statement', async () => {
      const { f } = suite;
      const { task, workers } = await warmSessions(suite, 8);
      await f.queue(task.id, 32);
      const before = f.db.statements.value;
      // 8 closed loops of 3 claims each: each puller pulls again the moment its answer arrives.
      const loops = workers.map(async (w) => {
        for (let i = 0; i < 3; i++) offered(await f.pull(w));
      });
      await Promise.all(loops);
      const statements = f.db.statements.value - before;
      expect(await f.count('runs', `status = 'queued'`)).toBe(8);
      // PostgreSQL: the first claim alone, then one statement per round of all 8 (ADR 0027: a statement
      // that returns lets the callers it answered pull again before the next one goes). Without that
      // turn of the event loop, the first re-pull would go alone and the others queue behind it.
      if (f.db.dialect === 'postgres') expect(statements).toBe(4);
      else expect(statements).toBeGreaterThanOrEqual(24 * 8);
    });

    it('a fenced puller among them is refused alone; the others are offered', async () => {
      const { f } = suite;
      const { task, workers } = await warmSessions(suite, 8);
      await f.queue(task.id, 8);
      const stale = workers[5]!;
      const calls = workers.map((w) =>
        w === stale
          ? f.pull({ ...w, fence: { ...w.fence, expectedVersion: w.fence.expectedVersion + 7 } })
          : f.pull(w),
      );
      await expectFence(calls[5]!, 'session', 'version_mismatch');
      const others = await Promise.all(calls.filter((_, i) => i !== 5));
      others.forEach(offered);
      expect(await f.count('run_leases', `worker_id = '${stale.workerId}' AND state = 'active'`)).toBe(1);
      expect(await f.count('runs', `status = 'queued'`)).toBe(1);
    });

    it('the same offer twice among them: one lease, and the second answer is its replay', async () => {
      const { f } = suite;
      const { task, workers } = await warmSessions(suite, 6);
      await f.queue(task.id, 6);
      const [first] = workers;
      const offerId = f.ids.uuidV7();
      const token = newToken();
      const calls = [
        ...workers.slice(1).map((w) => f.pull(w)),
        f.pull(first!, offerId, token),
        f.pull(first!, offerId, token),
      ];
      const results = (await Promise.all(calls)).map(offered);
      const [a, b] = results.slice(-2);
      expect(b!.lease.offerId).toBe(offerId);
      expect({ run: b!.run.id, attempt: b!.attempt.id }).toEqual({ run: a!.run.id, attempt: a!.attempt.id });
      expect(await f.count('run_leases', `offer_id = '${offerId}'`)).toBe(1);
      expect(new Set(results.map((r) => r.run.id)).size).toBe(6);
      expect(await f.count('runs', `status = 'queued'`)).toBe(0);
    });
  });
}

/** PostgreSQL only: a batch statement that fails as a whole (SQLite has no batch, and takes any text as an id). */
export function describeClaimBatchFallback(suite: DispatchSuite): void {
  describe('claims arriving together (PostgreSQL batch)', () => {
    it('a claim the database refuses fails alone: the statement it was in goes again claim by claim', async () => {
      const { f } = suite;
      const { task, workers } = await warmSessions(suite, 6);
      await f.queue(task.id, 6);
      // An offer id that is not a UUID: the database refuses the cast, so a statement carrying it
      // fails as a whole (the edge never lets one through; here it stands for any statement error).
      const calls = workers.map((w, i) => (i === 4 ? f.pull(w, 'not-a-uuid') : f.pull(w)));
      const refused = await calls[4]!.then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(Error);
      (await Promise.all(calls.filter((_, i) => i !== 4))).forEach(offered);
      expect(await f.count('runs', `status = 'queued'`)).toBe(1);
    });
  });
}
