/**
 * The V8 flags the worker's node runs with, by machine class. Every launcher — the quickstart,
 * `npm run start:worker`, the Dockerfile, docker-compose, the Kubernetes manifest and the systemd unit —
 * runs the `small` class's today (ADR 0014); the worker-cost bench measures both classes side by side.
 *
 * - `small` (a router): `--lite-mode` (no optimizing compilers, lazy feedback, bytecode flushing) brings
 *   an idle worker from ~2.1 × a bare `node` down to ~1.6 × (ADR 0014), at the price of interpreting
 *   every hot path. `--no-expose-wasm` says what lite mode does anyway (no WebAssembly), so that V8
 *   prints no warning on every start.
 * - `large`: V8's defaults, its compilers on: less CPU per run for more resident memory.
 *
 * They cannot go in NODE_OPTIONS: Node refuses `--lite-mode` there.
 */
export const MACHINE_CLASSES = ['small', 'large'] as const;
export type MachineClass = (typeof MACHINE_CLASSES)[number];

const FLAGS: Record<MachineClass, readonly string[]> = {
  small: ['--lite-mode', '--no-expose-wasm'],
  large: [],
};

export function workerNodeFlags(machineClass: MachineClass): readonly string[] {
  return FLAGS[machineClass];
}

/** The small machine's flags: what the tests and benches that model a router use. */
export const WORKER_NODE_FLAGS: readonly string[] = FLAGS.small;
