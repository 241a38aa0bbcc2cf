/**
 * The V8 flags every launcher of the control plane puts on `node`'s command line (ADR 0020, ADR 0024):
 * the quickstart, `npm run start:control-plane`, the Dockerfile's command (which docker-compose runs)
 * and the Kubernetes manifest. A 4 MiB semi-space (V8's default grows it to 16 MiB) keeps the young
 * generation's garbage from sitting in RSS at idle, and under load costs about the CPU of no cap at
 * all; the 1 MiB semi-space it replaced saved ~2–3 MiB more at idle for ~1.6 × the CPU per heartbeat
 * (`npm run bench -- memory` prints both). No old-space cap: the idle figure does not need one, and a
 * cap is a crash waiting for a large backlog.
 */
export const CONTROL_PLANE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];

/**
 * The environment every launcher gives the control plane besides its own settings (ADR 0024): glibc's
 * malloc keeps up to 8 arenas per core, one per thread that allocated (Node's libuv and V8 platform
 * threads), each holding freed memory of its own; 2 arenas hold less of it at idle (a few MiB of RSS).
 * The Dockerfile sets it for the image (docker-compose and Kubernetes run that image), the npm script
 * on its command, the quickstart when it spawns the control plane.
 */
export const CONTROL_PLANE_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };
