/** Exit codes an operator (or supervisor) can act on. */
export const WORKER_EXIT = {
  /** Stopped on SIGTERM/SIGINT after drain and offline. */
  ok: 0,
  /** Start failed, or stop failed or ran out of its budget. */
  failed: 1,
  /** Wrong profile or invalid configuration: fix the environment, restarting will not help. */
  config: 2,
  /** The control plane fenced this session (replaced, expired, disabled): never re-registered here. */
  fenced: 3,
} as const;
