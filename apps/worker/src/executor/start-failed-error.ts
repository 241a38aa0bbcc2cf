/** The run could not start: no process exists for it. */
export class StartFailedError extends Error {
  override readonly name = 'StartFailedError';
  constructor(
    readonly code:
      | 'runtime_unavailable'
      | 'work_dir_exists'
      | 'spawn_failed'
      | 'bundle_workdir_missing'
      | 'bundle_workdir_outside',
    message: string,
  ) {
    super(message);
  }
}
