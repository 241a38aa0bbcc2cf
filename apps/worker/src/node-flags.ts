/**
 * The V8 flags every launcher of the worker puts on `node`'s command line (ADR 0014): the quickstart,
 * `npm run start:worker`, the Dockerfile's worker command, docker-compose, the Kubernetes manifest and
 * the systemd unit. `--lite-mode` (no optimizing compilers, lazy feedback, bytecode flushing) is what
 * brings an idle worker from ~2.1 × a bare `node` down to ~1.6 ×; the worker's hot work is TLS, JSON and
 * child processes, which run in native code either way. `--no-expose-wasm` says what lite mode does
 * anyway (no WebAssembly), so that V8 does not print a warning on every start. They cannot go in
 * NODE_OPTIONS: Node refuses `--lite-mode` there.
 */
export const WORKER_NODE_FLAGS: readonly string[] = ['--lite-mode', '--no-expose-wasm'];
