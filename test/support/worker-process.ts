import { resolve } from 'node:path';
import { LoggedProcess } from './child-process';
import { WORKER, nodeArgs } from './entry-points';

const ROOT = resolve(__dirname, '..', '..');

/** The real worker entry point in a child process: its TypeScript sources through SWC, or its bundle (`nodeArgs`). */
export class WorkerProcess extends LoggedProcess {
  constructor(env: Record<string, string>) {
    super(process.execPath, nodeArgs(WORKER), {
      cwd: ROOT,
      env,
    });
  }
}
