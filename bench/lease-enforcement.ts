/**
 * `npm run bench -- lease-enforcement` (ADR 0028): what worker-side lease enforcement achieves and
 * what it costs.
 *
 * 1. Margins: how long before the end of its lease in the database (or the deadline sweep) the last
 *    process of attempt 1 stopped, in each hostile scenario of test/e2e/worker-lease-enforcement
 *    (a frozen worker, a path that swallows packets, answers delayed 4.5 s, a deadline sweep with no
 *    grace) — real worker processes and marker files; the e2e file writes one line per scenario into
 *    QL_LEASE_MARGINS_FILE. The task beats every 0.1 s, so its processes stopped within 0.1 s after
 *    the last beat: the reported margin takes the worst case (lease end − last beat − 0.1 s). Goal: > 0.
 *    Needs the dev install (jest); QL_BENCH_LEASE_SCENARIOS=0 skips it.
 * 2. The dead man's switch's cost: the reaper's CPU (its own and its reaped children's: a subshell and
 *    a `sleep` per arming) per arming, beside the CPU of the one `sh -c true` spawn every run makes
 *    (the same machine, the same run). A run is armed at launch and at every renewal: about
 *    1 + 3 × (run length ÷ lease) times.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { GroupReaper } from '../apps/worker/src/executor/group-reaper';
import { monotonicNow } from '../apps/worker/src/host/monotonic';
import { envNumber, median } from './lib/measure';
import { processTreeCpuMs } from './lib/proc-cpu';
import { Align, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

const ROOT = resolve(__dirname, '../..');
const BEAT_MS = 100;

interface Margin {
  readonly scenario: string;
  readonly endMs: number;
  readonly lastBeatMs: number;
  readonly marginMs: number;
}

function scenarioMargins(): Margin[] {
  const folder = mkdtempSync(join(tmpdir(), 'ql-bench-lease-'));
  const file = join(folder, 'margins.jsonl');
  try {
    const jest = spawnSync(
      process.execPath,
      [
        join(ROOT, 'node_modules/jest/bin/jest.js'),
        'test/e2e/worker-lease-enforcement.e2e-spec.ts',
        '--maxWorkers=1',
      ],
      {
        cwd: ROOT,
        env: { ...process.env, QL_LEASE_MARGINS_FILE: file },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    const summary = jest.stderr
      .toString()
      .split('\n')
      .filter((l) => /^Tests:/.test(l.trim()));
    console.log(`lease-enforcement scenarios: jest exit ${jest.status}; ${summary.join(' ').trim()}`);
    return readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Margin);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** CPU ms of the reaper tree per arming, armings paced `paceMs` apart (a renewal re-arms one group). */
async function switchCostPerArm(arms: number, paceMs: number): Promise<number> {
  const reaper = new GroupReaper('/bin/sh', 60_000);
  const target = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  await new Promise((done) => target.once('spawn', done));
  const pgid = target.pid!;
  reaper.track(pgid);
  reaper.arm(pgid, monotonicNow() + 60_000);
  await delay(200);
  const pid = reaper.pid!;
  const before = processTreeCpuMs(pid);
  for (let i = 0; i < arms; i++) {
    reaper.arm(pgid, monotonicNow() + 60_000);
    await delay(paceMs);
  }
  await delay(300); // the last disarmed sleepers end and are reaped
  const after = processTreeCpuMs(pid);
  reaper.untrack(pgid);
  reaper.release();
  target.kill('SIGKILL');
  // Once reaped, the reaper's CPU lands in this process's cutime: let that happen before spawns are counted.
  while (existsSync(`/proc/${pid}`)) await delay(10);
  return (after.own + after.children - before.own - before.children) / arms;
}

/** CPU ms (this process + its reaped child) of one detached `sh -c true` spawn, as a run's spawn. */
async function spawnCost(spawns: number): Promise<number> {
  const before = processTreeCpuMs('self');
  for (let i = 0; i < spawns; i++) {
    const child = spawn('/bin/sh', ['-c', 'true'], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise((done) => child.once('close', done));
  }
  const after = processTreeCpuMs('self');
  return (after.own + after.children - before.own - before.children) / spawns;
}

export async function leaseEnforcementMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const arms = Math.floor(envNumber('QL_BENCH_SWITCH_ARMS', 300, 10));
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2));
  console.log(
    `lease-enforcement bench: ${arms} armings per sample, ${rounds} rounds; load ${machine.loadAvgAtStart}`,
  );

  const perArm: number[] = [];
  const perSpawn: number[] = [];
  for (let r = 0; r < rounds; r++) {
    perSpawn.push(await spawnCost(arms));
    perArm.push(await switchCostPerArm(arms, 5));
  }
  const arm = median(perArm);
  const spawnMs = median(perSpawn);
  const run = (label: string, runMs: number, leaseMs = 60_000) => {
    const armings = 1 + Math.floor((3 * runMs) / leaseMs);
    const ms = arm * armings;
    return [
      `${label}, ${leaseMs / 1000} s lease (${armings} armings)`,
      ms.toFixed(3),
      (ms / spawnMs).toFixed(2),
    ];
  };
  const costRows = [
    ['one arming of the switch (reaper tree CPU)', arm.toFixed(3), (arm / spawnMs).toFixed(2)],
    ['one run spawn (`sh -c true`, parent + child)', spawnMs.toFixed(3), '1.00'],
    run('a 1 s run', 1_000),
    run('a 60 s run', 60_000),
    run('a 10 min run', 600_000),
  ];
  const costHeader = ['watchdog cost', 'CPU ms (median)', '÷ one run spawn'];
  const costAlign: Align[] = ['left', 'right', 'right'];
  console.log(textTable(costHeader, costRows, costAlign));

  const margins = process.env.QL_BENCH_LEASE_SCENARIOS === '0' ? [] : scenarioMargins();
  const marginRows = margins.map((m) => [
    m.scenario,
    String(m.marginMs),
    String(m.marginMs - BEAT_MS),
    m.marginMs - BEAT_MS > 0 ? 'dead before the end' : 'NOT before the end',
  ]);
  const marginHeader = ['scenario', 'end − last beat (ms)', 'worst case (ms)', 'goal > 0'];
  const marginAlign: Align[] = ['left', 'right', 'right', 'left'];
  if (margins.length) console.log(textTable(marginHeader, marginRows, marginAlign));

  writeResults(
    resultsDir,
    'lease-enforcement',
    started,
    { machine, arms, rounds, perArm, perSpawn, margins },
    [
      `# Lease enforcement (ADR 0028), ${started.toISOString()}`,
      '',
      `Machine: ${machine.cpuCount} CPUs, node ${machine.node}, 1-min load ${machine.loadAvgAtStart} at start.`,
      '',
      '## How long before its lease end attempt 1 was dead',
      '',
      "The lease end is the database's (the last term a renewal granted), or the deadline sweep. The task beats every 0.1 s: its processes stopped within 0.1 s after its last beat, so the worst case is that margin less 0.1 s.",
      '',
      margins.length
        ? markdownTable(marginHeader, marginRows, marginAlign)
        : '(skipped: QL_BENCH_LEASE_SCENARIOS=0)',
      '',
      "## What the dead man's switch costs",
      '',
      `Median of ${rounds} rounds of ${arms} armings (reaper CPU, own + reaped children) and of as many run spawns, alternated; each divided by the CPU of the one spawn a run makes anyway.`,
      '',
      markdownTable(costHeader, costRows, costAlign),
      '',
    ],
  );
}
