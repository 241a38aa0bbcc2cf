/** The worker's exit codes an operator (or supervisor) can act on; the quickstart reads them too. */
export const WORKER_EXIT = {
  /** Stopped on SIGTERM/SIGINT/SIGHUP after drain and offline. */
  ok: 0,
  /** Start failed, or stop failed or ran out of its budget. */
  failed: 1,
  /** Wrong profile or invalid configuration: fix the environment, restarting will not help. */
  config: 2,
  /** The control plane fenced this session (replaced, expired): never re-registered here. */
  fenced: 3,
  /**
   * Another live process holds the journal folder's kernel lock (ADR 0029): another worker, or the
   * `journal` command, uses this QL_WORKER_JOURNAL_DIR. Restart with back-off; it starts once that
   * process is gone.
   */
  journalLocked: 4,
  /**
   * An operator disabled this worker (`POST /api/v1/workers/{id}/disable`): its session was fenced, or
   * its registration refused, with reason `worker_disabled` (ADR 0035). Restarting cannot help until
   * `POST /api/v1/workers/{id}/enable`; the quickstart and the systemd unit do not restart it.
   */
  disabled: 5,
  /**
   * The worker's certificate expired before it could be renewed (ADR 0045 §3): it cannot renew or
   * register any more. An admin makes a new token (`npm run enroll-token -- create --worker <id>`) and
   * the worker starts again with it in `QL_WORKER_ENROLL_TOKEN` or `QL_WORKER_ENROLL_TOKEN_FILE`.
   */
  certificateExpired: 6,
  /**
   * `certificate_superseded` (ADR 0045 §4): the certificate was renewed by another process, so this
   * worker's identity was used from another machine. Revoke the worker, then enroll this machine again.
   */
  certificateSuperseded: 7,
  /**
   * `enrollment_refused`: the control plane refused the enrollment token (invalid, expired, revoked,
   * used, exhausted or for another worker id; the code is printed). A new token is needed.
   */
  enrollmentRefused: 8,
  /**
   * `certificate_revoked` (ADR 0055): an admin revoked this worker's certificate. It stopped pulling,
   * ended its runs (no call of a revoked certificate is heard) and moved the certificate aside to
   * `<cert>.revoked`; restarting cannot help until it has a new token, with which its next start
   * enrolls again. The quickstart, the systemd unit and the deployment notes do not restart it.
   * Not 9: node itself exits 9 on a bad option (Node 24 refused a flag so), which must not read as revoked.
   */
  certificateRevoked: 11,
  /**
   * `protocol_unsupported` (ADR 0060): the control plane serves no protocol version this worker
   * speaks (every one from `QL_WORKER_PROTOCOL_MAX` down was refused). Restarting cannot help until
   * the worker or the control plane is upgraded (or the pin raised); the quickstart, the systemd unit
   * and the deployment notes do not restart it. Not 12–14: node's own exits (debug argument, top-level
   * await, snapshot).
   */
  protocolUnsupported: 15,
} as const;

/** The refusal that makes a worker exit `disabled` rather than `fenced` or `failed`. */
export const WORKER_DISABLED_REASON = 'worker_disabled';
