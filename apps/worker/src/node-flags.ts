/**
 * The V8 flags the worker's node runs with, by machine class. Every launcher — `npm run start:worker`,
 * the quickstart, the image's worker command (Compose, Kubernetes) and the systemd unit — starts the
 * worker through `bin/ql-worker`, which picks the class from `QL_WORKER_MACHINE_CLASS` (`auto` by
 * default: small at or below 1 GiB of memory the worker may use, large above it) and execs node with
 * its flags (ADR 0046).
 *
 * - `small` (a router): `--lite-mode` (no optimizing compilers, lazy feedback, bytecode flushing) brings
 *   an idle worker from ~2.1 × a bare `node` down to ~1.6 × (ADR 0014), at the price of interpreting
 *   every hot path. `--no-expose-wasm` says what lite mode does anyway (no WebAssembly), so that V8
 *   prints no warning on every start — on Node 20 and 22; Node 24 (V8 13) refuses that flag (a "bad
 *   option", exit 9) and needs none, so there the small class is `--lite-mode` alone.
 * - `large`: V8's defaults, its compilers on: less CPU per run for more resident memory (the
 *   worker-cost and memory benches measure both; ADR 0046 has the figures).
 *
 * `bin/ql-worker` is POSIX sh and holds a copy of these lists (it must not start a node to ask):
 * test/deploy/worker-launcher.spec.ts runs it for every class and holds the flags node received equal
 * to `workerNodeFlags()`. They cannot go in NODE_OPTIONS: Node refuses `--lite-mode` there.
 */
export const MACHINE_CLASSES = ['small', 'large'] as const;
export type MachineClass = (typeof MACHINE_CLASSES)[number];

const FLAGS: Record<MachineClass, readonly string[]> = {
  small: ['--lite-mode', '--no-expose-wasm'],
  large: [],
};

/** The first Node major whose V8 refuses `--no-expose-wasm`. */
const NODE_WITHOUT_EXPOSE_WASM = 24;

/** The class's flags for the node of `nodeVersion` (`process.versions.node` form; this process's by default). */
export function workerNodeFlags(
  machineClass: MachineClass,
  nodeVersion: string = process.versions.node,
): readonly string[] {
  const major = Number(/^v?(\d+)\./.exec(nodeVersion)?.[1]);
  if (machineClass === 'small' && major >= NODE_WITHOUT_EXPOSE_WASM)
    return FLAGS.small.filter((flag) => flag !== '--no-expose-wasm');
  return FLAGS[machineClass];
}

/** The small machine's flags on this node: what the tests and benches that model a router use. */
export const WORKER_NODE_FLAGS: readonly string[] = workerNodeFlags('small');
