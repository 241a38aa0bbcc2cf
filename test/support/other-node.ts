import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';

import MATRIX from './node-matrix.json';

/** The Node versions of the test matrix besides the machine's own (issue 30): .ci/run reads the same file. */
export const NODE_MATRIX: Readonly<Record<'22' | '24', string>> = MATRIX;

const INSTALL = resolve(__dirname, '../../scripts/install-node.sh');

/**
 * The `node` binary of another Node major for x64 (or arm64, run under qemu), installed from the npm
 * registry into .cache/node on first use (a few seconds; scripts/install-node.sh).
 */
export function otherNode(major: 22 | 24, arch: 'x64' | 'arm64' = 'x64'): string {
  const dir = execFileSync(INSTALL, [NODE_MATRIX[String(major) as '22' | '24'], arch], {
    encoding: 'utf8',
  }).trim();
  return join(dir, 'bin', 'node');
}
