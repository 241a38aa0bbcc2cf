/**
 * The `peer` group of `npm run bench`: our real path beside a fair peer, in one run, interleaved
 * round by round. Ours: a control plane (`cluster-control` on PostgreSQL, as shipped, in its own
 * process) and W real worker processes × S slots draining `sh -c true` runs triggered through the
 * admin API. The peer: graphile-worker 0.16.6 on the same PostgreSQL server, in its own process, whose
 * job spawns `sh -c true` exactly as our executor does, at concurrency W × S (bench/peer-child.ts).
 * Figures: runs/s and their ratio, CPU per run by process class, latency at idle (ours with its
 * breakdown by step); bench/peer-report.ts prints them and writes peer-<time>.json and latest-peer.md.
 */
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import { noopTask } from './dispatch';
import { databaseName, openBackendsReader, sharedComponents } from './dispatch-cpu';
import { envNumber } from './lib/measure';
import { WORKER_MAIN, createBenchPki, createPlaneDatabase, startPlaneProcess } from './lib/plane';
import { createBenchDatabase, localPostmasterPid, redactUrl } from './lib/postgres-admin';
import { spawnNode } from './lib/processes';
import { machineInfo } from './lib/report';
import { Level, RunLatency, levelName, oursAtIdle, parseLevels, peerSample } from './peer';
import { PeerConfig, RoundSample, oursCpu, peerCpu, reportPeer } from './peer-report';
import { workerProcessDrain } from './worker-drain';

function config(): PeerConfig {
  return {
    levels: parseLevels(process.env.QL_BENCH_PEER_LEVELS || '1x1,4x1,4x4'),
    runs: Math.floor(envNumber('QL_BENCH_PEER_RUNS', 150, 1)),
    warmup: Math.floor(envNumber('QL_BENCH_PEER_WARMUP', 20, 1)),
    rounds: Math.floor(envNumber('QL_BENCH_PEER_ROUNDS', 3, 1)),
    latencySamples: Math.floor(envNumber('QL_BENCH_PEER_LATENCY_SAMPLES', 100, 1)),
    latencyWarmup: Math.floor(envNumber('QL_BENCH_PEER_LATENCY_WARMUP', 5, 0)),
    pauseMs: envNumber('QL_BENCH_PEER_LATENCY_PAUSE_MS', 50, 0),
  };
}

export async function peerMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const cfg = config();
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const log = (line: string) => console.log(line);
  log(
    `peer bench: W×S ${cfg.levels.map(levelName).join(', ')}, ${cfg.runs} runs per sample (after ` +
      `${cfg.warmup}), ${cfg.rounds} rounds; latency ${cfg.latencySamples} samples; PostgreSQL ` +
      `${redactUrl(pgUrl)}; node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const notes: string[] = [];
  const postmasterPid = await localPostmasterPid(pgUrl).catch(() => undefined);
  if (postmasterPid === undefined)
    throw new Error('the peer group needs a local PostgreSQL server (its backends CPU)');
  const ids = Array.from(
    { length: Math.max(...cfg.levels.map((l) => l.workers)) },
    (_, i) => `peer-w${i + 1}`,
  );
  const samples: RoundSample[] = [];
  const ours: RunLatency[] = [];
  const theirs: number[] = [];
  // Undone in reverse order, also when a later one fails to be made.
  const cleanup: (() => Promise<void>)[] = [];
  try {
    const backends = await openBackendsReader(pgUrl);
    cleanup.push(() => backends.close());
    const pki = await createBenchPki(ids);
    cleanup.push(async () => pki.remove());
    const db = await createPlaneDatabase('postgres', pgUrl);
    cleanup.push(() => db.drop());
    const peerDb = await createBenchDatabase(pgUrl);
    cleanup.push(() => peerDb.drop());
    const plane = await startPlaneProcess(db, pki);
    cleanup.push(() => plane.stop());
    const shared = sharedComponents(plane.process.pid, postmasterPid);
    const planeDb = databaseName(db.url);
    let tasks = 0;
    const queueTask = async (name: string, n: number) => {
      // Task names are unique among live tasks: one per drain.
      const task = await noopTask(plane, `${name} n${++tasks}`);
      for (let i = 0; i < n; i++) await task.trigger();
      return task.taskId;
    };
    const oursAt = async (level: Level) =>
      workerProcessDrain(
        plane,
        pki,
        db,
        ids.slice(0, level.workers),
        cfg.runs,
        cfg.warmup,
        queueTask,
        { QL_WORKER_MAX_CONCURRENT_RUNS: String(level.slots) },
        shared,
        () => backends.read(planeDb),
      );
    const peerAt = async (level: Level) => {
      const answer = await peerSample({
        mode: 'throughput',
        url: peerDb.url,
        adminUrl: pgUrl,
        concurrency: level.workers * level.slots,
        runs: cfg.runs,
        warmup: cfg.warmup,
        postmasterPid,
      });
      if (answer.mode !== 'throughput') throw new Error(`peer answered ${answer.mode}`);
      return answer.result;
    };
    const attempt = async <T>(what: string, fn: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await fn();
      } catch (error) {
        notes.push(`${what}: no figure (${(error as Error).message.split('\n')[0]})`);
        log(notes.at(-1)!);
        return undefined;
      }
    };
    for (let round = 1; round <= cfg.rounds; round++) {
      for (const level of cfg.levels) {
        const name = levelName(level);
        // Alternate who goes first, so neither always gets the quieter moment.
        const peerFirst = round % 2 === 0;
        const p1 = peerFirst ? await attempt(`round ${round} ${name} peer`, () => peerAt(level)) : undefined;
        const o = await attempt(`round ${round} ${name} ours`, () => oursAt(level));
        const p = peerFirst ? p1 : await attempt(`round ${round} ${name} peer`, () => peerAt(level));
        samples.push({ round, level: name, ...(o ? { ours: o } : {}), ...(p ? { peer: p } : {}) });
        log(
          `peer round ${round} ${name}: ours ${o?.runsPerSecond.toFixed(1) ?? '—'} runs/s, ` +
            `CPU ${oursCpu(o)?.total.toFixed(2) ?? '—'} ms/run; peer ${p?.jobsPerSecond.toFixed(1) ?? '—'} ` +
            `runs/s, CPU ${peerCpu(p)?.total.toFixed(2) ?? '—'} ms/run`,
        );
      }
    }
    // Latency at idle: one worker, one slot, as shipped; chunks alternate with the peer's.
    await attempt('latency at idle', async () => {
      const worker = spawnNode(
        [...WORKER_NODE_FLAGS, WORKER_MAIN],
        pki.workerEnv(ids[0]!, plane.ready.ingressUrl),
      );
      cleanup.push(() => worker.stop());
      await worker.untilLine('worker registered', 60_000);
      const { trigger } = await noopTask(plane, 'peer latency');
      const alive = () => {
        if (worker.child.exitCode !== null)
          throw new Error(`the worker exited:\n${worker.output.join('\n')}`);
      };
      for (let chunk = 0; chunk < cfg.rounds; chunk++) {
        const n =
          Math.floor(cfg.latencySamples / cfg.rounds) + (chunk < cfg.latencySamples % cfg.rounds ? 1 : 0);
        const opts = { samples: n, warmup: cfg.latencyWarmup, pauseMs: cfg.pauseMs };
        ours.push(...(await oursAtIdle(plane, db.url, trigger, opts, alive)));
        const answer = await peerSample({ mode: 'latency', url: peerDb.url, ...opts });
        if (answer.mode !== 'latency') throw new Error(`peer answered ${answer.mode}`);
        theirs.push(...answer.latenciesMs);
        log(`peer latency chunk ${chunk + 1}: ours ${ours.length}, peer ${theirs.length} samples`);
      }
    });
  } finally {
    for (const undo of cleanup.reverse())
      await undo().catch((error: Error) => notes.push(`cleanup: ${error.message.split('\n')[0]}`));
  }
  reportPeer(resultsDir, started, machine, cfg, pgUrl, samples, ours, theirs, notes);
}
