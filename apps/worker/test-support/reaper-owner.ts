/**
 * A stand-in worker for the reaper test: starts a reaper, launches `sleep` in a process group of its
 * own, tracks it (and one more it untracks at once), prints the group ids, then waits to be killed.
 * `REAPER_LINGER_MS` sets the reaper's linger (0 by default).
 */
import { spawn } from 'node:child_process';
import { GroupReaper } from '../src/executor/group-reaper';

const reaper = new GroupReaper(undefined, Number(process.env.REAPER_LINGER_MS ?? 0));
const launch = () => spawn('/bin/sh', ['-c', 'sleep 120'], { detached: true, stdio: 'ignore' }).pid!;
const tracked = launch();
const untracked = launch();
reaper.track(tracked);
reaper.track(untracked);
reaper.untrack(untracked);
process.stdout.write(`${JSON.stringify({ tracked, untracked, reaper: reaper.pid })}\n`);
setInterval(() => undefined, 60_000);
