import { spawn } from 'node:child_process';
import { extname, join } from 'node:path';
import { devPkiComplete, EnsureDevPkiOptions } from './dev-pki';

/**
 * The control plane's start with `QL_DEV_PKI=true` (ADR 0048): when the development PKI in `dir` is
 * complete (every start after the first) nothing is made and nothing is loaded; when a piece is
 * missing or unusable it is made by a short-lived process of its own, `cli.js pki`, the command
 * `npm run pki` runs. Making certificates loads @peculiar/x509 (~210 files) and leaves key-generation
 * garbage: in the control plane's own process they stayed for its whole life, ~3.5 MiB of the first
 * quickstart's idle plane. The process runs the way this one runs (`process.execArgv`: the built
 * tree, or the sources in tests) and answers before the plane reads the files.
 */
export async function ensureDevPkiApart(dir: string, opts: EnsureDevPkiOptions): Promise<void> {
  if (await devPkiComplete(dir, opts)) return;
  const cli = join(__dirname, '..', `cli${extname(__filename)}`);
  const args = [...process.execArgv, cli, 'pki', ...opts.workers.flatMap((id) => ['--worker', id])];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, QL_DEV_PKI_DIR: dir, QL_TRUST_DOMAIN: opts.trustDomain },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stderr: Buffer[] = [];
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) {
    const said = Buffer.concat(stderr).toString('utf8').trim();
    throw new Error(`the development PKI in ${dir} could not be made (exit ${code}): ${said}`);
  }
}
