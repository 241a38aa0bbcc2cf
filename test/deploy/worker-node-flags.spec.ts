/**
 * ADR 0014, ADR 0046: every launcher of the worker starts it through bin/ql-worker, which puts the V8
 * flags of the machine class on `node`'s command line, so a worker costs what the benches measured
 * for its class whichever way it is started. The Kubernetes manifest and the systemd unit are checked
 * in their own specs, the quickstart in its e2e test, the launcher itself in worker-launcher.spec.ts.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { MACHINE_CLASSES, workerNodeFlags } from '../../apps/worker/src/node-flags';
import { REPO_ROOT, instructions, parseDockerfile } from '../support/docker-emulation';
import { expectQuietNodeFlags } from '../support/node-flags';
import { LAUNCHER } from '../support/worker-launcher';

const WORKER_MAIN = 'apps/worker/src/main.js';
/** What the launcher starts (ADR 0049): the worker's entry bundled by `npm run build`. */
const WORKER_BUNDLE = 'apps/worker/bundle/main.js';
const read = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8');
const filesUnder = (dir: string): string[] =>
  readdirSync(join(REPO_ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(REPO_ROOT, path)).isDirectory() ? filesUnder(path) : [path];
  });

describe('the V8 flags of the worker (ADR 0014, ADR 0046) on every launcher', () => {
  it('are V8 flags only, none of them refused on the command line, and this node accepts every class’s without a word on stderr (V8 warns about lite mode and WebAssembly otherwise)', () => {
    const withFlags = MACHINE_CLASSES.filter((c) => workerNodeFlags(c).length > 0);
    expect(withFlags).toContain('small');
    for (const machineClass of withFlags) expectQuietNodeFlags(workerNodeFlags(machineClass));
  });

  it('npm run start:worker runs the launcher', () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const command = scripts['start:worker']!.split('&&').pop()!.trim().split(/\s+/);
    expect(command).toEqual(['QL_PROFILE=worker', LAUNCHER]);
  });

  it('every docker-compose worker service runs the launcher', () => {
    const compose = parse(read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
    };
    const workers = Object.entries(compose.services).filter(
      ([, s]) => s.environment?.QL_PROFILE === 'worker',
    );
    expect(workers.map(([name]) => name)).toEqual(['worker-1', 'worker-2']);
    for (const [name, s] of workers)
      expect({ name, command: s.command }).toEqual({ name, command: [LAUNCHER] });
  });

  it('the image holds the launcher in its WORKDIR, and the Dockerfile’s worker command shows it', () => {
    const stages = parseDockerfile(read('Dockerfile'));
    const runtime = stages[stages.length - 1]!;
    expect(instructions(runtime, 'WORKDIR')).toEqual(['/app']);
    expect(instructions(runtime, 'COPY')).toContain(`${LAUNCHER} ./bin/`);
    const comment = read('Dockerfile')
      .split('\n')
      .filter((l) => l.startsWith('#') && l.includes(LAUNCHER));
    expect(comment).toEqual([expect.stringMatching(new RegExp(`^#\\s+${LAUNCHER}$`))]);
  });

  it('no deployment file starts the worker’s main.js or its bundle but the launcher (a launcher that bypasses it fails here)', () => {
    const files = [
      'package.json',
      'Dockerfile',
      'docker-compose.yml',
      ...filesUnder('deploy'),
      // The bundler reads main.js and writes the bundle: it starts neither.
      ...filesUnder('scripts').filter((file) => file !== join('scripts', 'bundle-worker.js')),
    ];
    const naming = files.filter(
      (file) => read(file).includes(WORKER_MAIN) || read(file).includes(WORKER_BUNDLE),
    );
    expect(naming).toEqual([]);
    expect(read(LAUNCHER)).toContain(`entry=\${QL_WORKER_ENTRY:-$here/../dist/${WORKER_BUNDLE}}`);
  });
});
