/**
 * The fair peer's own process (the `peer` group starts one per sample, plain `node`, no flags):
 * graphile-worker 0.16.6 whose job spawns `/bin/sh -c true` exactly as the worker's executor does
 * (`spawnOne`: detached process group, stdin ignored, stdout and stderr piped and read to the end,
 * awaited to exit and close). In a process of its own so that its CPU, and its children's, is its
 * alone. `node peer-child.js '<PeerChildRequest as JSON>'` prints one JSON line `{ "peer": … }`.
 */
import { openBackendsReader, postgresCpuMs } from './dispatch-cpu';
import { processTreeCpuMs } from './lib/proc-cpu';
import { GraphilePeerResult, measureGraphilePeer } from './peer-graphile';
import { measureGraphileLatency } from './peer-graphile-latency';
import { spawnOne } from './spawn-ceiling-child';

export type PeerChildRequest =
  | {
      readonly mode: 'throughput';
      /** The peer's database (graphile's schema is made and dropped in it). */
      readonly url: string;
      /** A database on the same server to read the peer's backends through (not counted). */
      readonly adminUrl: string;
      readonly concurrency: number;
      readonly runs: number;
      readonly warmup: number;
      /** The server's postmaster when it is local: the whole server's CPU per job. */
      readonly postmasterPid: number | null;
    }
  | {
      readonly mode: 'latency';
      readonly url: string;
      readonly samples: number;
      readonly warmup: number;
      readonly pauseMs: number;
    };

export type PeerChildAnswer =
  | { readonly mode: 'throughput'; readonly result: GraphilePeerResult }
  | { readonly mode: 'latency'; readonly latenciesMs: number[] };

async function serve(request: PeerChildRequest): Promise<PeerChildAnswer> {
  const log = (line: string) => process.stderr.write(`${line}\n`);
  if (request.mode === 'latency') {
    const latenciesMs = await measureGraphileLatency(request.url, { ...request, task: spawnOne, log });
    return { mode: 'latency', latenciesMs };
  }
  const backends = await openBackendsReader(request.adminUrl);
  try {
    const { postmasterPid } = request;
    const result = await measureGraphilePeer(request.url, {
      concurrency: request.concurrency,
      backlog: request.warmup + request.runs,
      warmupJobs: request.warmup,
      measureJobs: request.runs,
      task: spawnOne,
      log,
      backendsProbe: backends.read,
      probes: {
        // The `sh -c true` of each job: reaped ones in cutime + cstime, live ones their own.
        children: () => processTreeCpuMs('self').children,
        ...(postmasterPid === null ? {} : { postgres: () => postgresCpuMs(postmasterPid) }),
      },
    });
    return { mode: 'throughput', result };
  } finally {
    await backends.close();
  }
}

if (require.main === module) {
  let request: PeerChildRequest;
  try {
    request = JSON.parse(process.argv[2] ?? '') as PeerChildRequest;
  } catch {
    console.error("usage: node peer-child.js '<request JSON>' (started by the peer bench group)");
    process.exit(2);
  }
  serve(request).then(
    (answer) => console.log(JSON.stringify({ peer: answer })),
    (error: Error) => {
      console.error(error.stack ?? error.message);
      process.exitCode = 1;
    },
  );
}
