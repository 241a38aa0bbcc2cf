/**
 * The `dispatch` group's CPU per run by component and its table: where one remote run's CPU goes
 * (control plane, worker, the no-op child, PostgreSQL), beside graphile-worker's CPU per no-op job
 * (its process, this bench's, + the same PostgreSQL server) and the spawn ceiling's fork cost. CPU
 * time is read from /proc (bench/lib/proc-cpu.ts) around each drain: unlike runs/s, a busy neighbour
 * on the shared machine moves it little.
 */
import type { GraphilePeerResult } from './peer-graphile';
import type { SpawnCeiling } from './spawn-ceiling';
import { Align } from './lib/report';
import { Client } from 'pg';
import { CpuReading, perPidDelta, processTreeCpuMs, readProcStat, ticksToMs } from './lib/proc-cpu';
import { backendsCpuMs } from './lib/postgres-admin';
import { cpuMs } from './lib/processes';

/** Own CPU ms by pid of the backends connected to one database (pg_stat_activity + /proc). */
export type BackendsReader = (database: string) => Promise<Map<number, number>>;

/** One admin connection that reads any database's backends; it is on the admin database, so never counted. */
export async function openBackendsReader(
  adminUrl: string,
): Promise<{ read: BackendsReader; close(): Promise<void> }> {
  const client = new Client({ connectionString: adminUrl, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  await client.connect();
  return { read: (database) => backendsCpuMs(client, database), close: () => client.end() };
}

/** The database name of a PostgreSQL URL. */
export function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

/**
 * CPU ms of one database's backends between now and when the returned function is called, divided
 * by the runs it is given: the part of the server's CPU that is ours on a shared server (not in the
 * total; backends that end in between are lost, see `perPidDelta`).
 */
export async function backendsWindow(
  read: BackendsReader | undefined,
  database: string,
): Promise<(runs: number) => Promise<CpuReading>> {
  if (!read) return async () => ({});
  const before = await read(database);
  return async (runs) => ({ postgresDb: perPidDelta(before, await read(database)) / runs });
}

/** The components of one drain's CPU, in the table's order. */
export const CPU_COMPONENTS = ['plane', 'worker', 'noop', 'postgres'] as const;

/**
 * Readers of cumulative CPU ms for the components every drain shares: the control plane process
 * and, when the server is local, the whole PostgreSQL server (postmaster + live backends and helpers
 * + the exited ones it reaped).
 */
export function sharedComponents(
  planePid: number,
  postmasterPid: number | undefined,
): Record<string, () => number> {
  return {
    plane: () => cpuMs(planePid),
    ...(postmasterPid === undefined ? {} : { postgres: () => postgresCpuMs(postmasterPid) }),
  };
}

export function postgresCpuMs(postmasterPid: number): number {
  const tree = processTreeCpuMs(postmasterPid);
  return tree.own + tree.children;
}

/**
 * The components of a drain by sessions in this process: `worker` is this process's CPU (the
 * sessions' TLS clients, JSON, spawning), `noop` its reaped children (the `sh -c true` of each run;
 * the control plane is a live child and is not in it).
 */
export function inBenchComponents(shared: Record<string, () => number>): Record<string, () => number> {
  return {
    ...shared,
    worker: () => {
      const cpu = process.cpuUsage();
      return (cpu.user + cpu.system) / 1000;
    },
    noop: () => {
      const self = readProcStat('self');
      return ticksToMs(self.cutime + self.cstime);
    },
  };
}

/** What one CPU row needs: who drained, at which level, and what was measured beside it. */
export interface CpuRowInput {
  readonly dialect: string;
  readonly level: number;
  readonly drainedBy: 'bench sessions' | 'worker processes';
  readonly cpuMsPerRun?: CpuReading;
  readonly peer?: GraphilePeerResult;
  readonly ceiling?: SpawnCeiling;
}

export const CPU_HEADER = [
  'dialect',
  'level',
  'drained by',
  'plane ms',
  'worker ms',
  'no-op child ms',
  'PostgreSQL ms',
  "of which our database's backends ms",
  'total ms / run',
  'graphile ms / job (process + PostgreSQL; its backends)',
  'total ÷ graphile',
  'total ÷ graphile, backends only',
  'spawn ceiling ms / spawn (parent + child)',
];
export const CPU_ALIGN: Align[] = CPU_HEADER.map((_, i) => (i <= 2 ? 'left' : 'right'));

const ms = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(2));

/**
 * Our total per run ÷ graphile's per job with PostgreSQL counted as the backends of each side's own
 * database only (what other users of a shared server do is then left out); SQLite: its plane's.
 */
function backendsOnlyRatio(c: CpuReading | undefined, peer: GraphilePeerResult | undefined): string {
  if (!c || c.total === undefined || !peer || peer.backendsCpuMsPerJob === undefined) return '—';
  const ours = c.total - (c.postgres ?? 0) + (c.postgres === undefined ? 0 : (c.postgresDb ?? Number.NaN));
  const theirs = peer.processCpuUsPerJob / 1000 + peer.backendsCpuMsPerJob;
  return Number.isNaN(ours) ? '—' : `${(ours / theirs).toFixed(1)} ×`;
}

/** Graphile's CPU per job: its process (this bench) + the PostgreSQL server, if that was read. */
export function graphileCpuMsPerJob(peer: GraphilePeerResult | undefined): number | undefined {
  if (!peer || peer.probeCpuMsPerJob === undefined) return undefined;
  return peer.processCpuUsPerJob / 1000 + peer.probeCpuMsPerJob;
}

export function cpuRow(r: CpuRowInput): string[] {
  const c = r.cpuMsPerRun;
  const graphile = graphileCpuMsPerJob(r.peer);
  return [
    r.dialect,
    String(r.level),
    r.drainedBy,
    ...CPU_COMPONENTS.map((name) => ms(c?.[name])),
    ms(c?.postgresDb),
    ms(c?.total),
    graphile === undefined
      ? '—'
      : `${ms(graphile)} (${ms(r.peer!.processCpuUsPerJob / 1000)} + ${ms(r.peer!.probeCpuMsPerJob)}; ` +
        `${ms(r.peer!.backendsCpuMsPerJob)})`,
    c?.total !== undefined && graphile ? `${(c.total / graphile).toFixed(1)} ×` : '—',
    backendsOnlyRatio(c, r.peer),
    r.ceiling
      ? `${ms(r.ceiling.parentCpuMsPerSpawn + r.ceiling.childCpuMsPerSpawn)} (${ms(r.ceiling.parentCpuMsPerSpawn)} + ${ms(r.ceiling.childCpuMsPerSpawn)})`
      : '—',
  ];
}

/** The paragraph above the CPU table in latest-dispatch.md. */
export const CPU_EXPLANATION =
  'CPU time (user + system; /proc/<pid>/stat, clock ticks of `getconf CLK_TCK`) read before and after ' +
  'each drain, divided by the runs between the readings. plane = the control plane process; worker = ' +
  'the bench process (`process.cpuUsage()`, bench sessions) or the worker processes (from the moment ' +
  'all had registered and the warm-up was done); no-op child = the reaped children of that process ' +
  "(cutime + cstime: each run's `sh -c true`; for worker processes also their live reaper `sh`); " +
  'PostgreSQL = the whole local server: the postmaster, its live processes and the exited backends it ' +
  'reaped (other users of the shared server count too; SQLite: —, its work is in the plane); of which ' +
  "our database's backends = the backends connected to the plane's database (pg_stat_activity, their " +
  '/proc CPU per pid; a backend that ends mid-drain is lost), what is surely ours on a shared server. graphile ' +
  'per job = this process (where graphile runs) + the same PostgreSQL reading, over its counted window; ' +
  "after the semicolon its own database's backends, the basis of the last ratio. " +
  'Spawn ceiling = the ceiling process beside the drain: its own CPU + its children per spawn, the fork ' +
  'cost of one run on this machine. CPU moves much less than runs/s when the shared machine is busy.';
