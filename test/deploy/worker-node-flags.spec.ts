/**
 * ADR 0014: every launcher of the worker puts the same V8 flags on `node`'s command line, so an idle
 * worker costs what the bench measured whichever way it is started. The Kubernetes manifest and the
 * systemd unit are checked in their own specs, the quickstart in its e2e test.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { WORKER_NODE_FLAGS } from '../../apps/worker/src/node-flags';
import { REPO_ROOT } from '../support/docker-emulation';
import { expectQuietNodeFlags } from '../support/node-flags';

const WORKER_MAIN = 'dist/apps/worker/src/main.js';
const read = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8');

describe('the V8 flags of the worker (ADR 0014) on every launcher', () => {
  it('are V8 flags only, none of them refused on the command line, and this node accepts them without a word on stderr (V8 warns about lite mode and WebAssembly otherwise)', () => {
    expectQuietNodeFlags(WORKER_NODE_FLAGS);
  });

  it('npm run start:worker runs node with them', () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const command = scripts['start:worker']!.split('&&').pop()!.trim().split(/\s+/);
    expect(command.slice(command.indexOf('node'))).toEqual(['node', ...WORKER_NODE_FLAGS, WORKER_MAIN]);
  });

  it('every docker-compose worker service runs node with them', () => {
    const compose = parse(read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, { command?: string[] }>;
    };
    const workers = Object.entries(compose.services).filter(([, s]) => s.command?.includes(WORKER_MAIN));
    expect(workers.map(([name]) => name)).toEqual(['worker-1', 'worker-2']);
    for (const [name, s] of workers) {
      expect({ name, command: s.command }).toEqual({
        name,
        command: ['node', ...WORKER_NODE_FLAGS, WORKER_MAIN],
      });
    }
  });

  it("the Dockerfile's worker command shows them", () => {
    const line = read('Dockerfile')
      .split('\n')
      .find((l) => l.includes(WORKER_MAIN));
    expect(line).toContain(`node ${WORKER_NODE_FLAGS.join(' ')} ${WORKER_MAIN}`);
  });
});
