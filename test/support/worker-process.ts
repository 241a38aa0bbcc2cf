import { resolve } from 'node:path';
import { LoggedProcess } from './child-process';

const ROOT = resolve(__dirname, '..', '..');

/** The real worker entry point in a child process, running the TypeScript sources through SWC. */
export class WorkerProcess extends LoggedProcess {
  constructor(env: Record<string, string>) {
    super(process.execPath, ['-r', './apps/worker/test-support/swc-register.js', 'apps/worker/src/main.ts'], {
      cwd: ROOT,
      env,
    });
  }
}
