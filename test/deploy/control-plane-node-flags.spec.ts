/**
 * ADR 0020: every launcher of the control plane puts the same V8 flags on `node`'s command line, so an
 * idle control plane costs what the bench measured whichever way it is started; ADR 0024: and gives it
 * the same environment (`CONTROL_PLANE_ENV`). The Kubernetes manifest is checked in its own spec (it
 * runs the image, whose ENV is checked here), the Dockerfile's CMD in the compose e2e test (which runs
 * it), the quickstart in its e2e test.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { CONTROL_PLANE_ENV, CONTROL_PLANE_NODE_FLAGS } from '../../apps/control-plane/src/node-flags';
import { REPO_ROOT } from '../support/docker-emulation';
import { expectQuietNodeFlags } from '../support/node-flags';

const MAIN = 'dist/apps/control-plane/src/main.js';
const read = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8');
const ENV_ASSIGNMENTS = Object.entries(CONTROL_PLANE_ENV).map(([name, value]) => `${name}=${value}`);

describe('the V8 flags of the control plane (ADR 0020) on every launcher', () => {
  it('are V8 flags only, each accepted by this node without a word on stderr', () => {
    expectQuietNodeFlags(CONTROL_PLANE_NODE_FLAGS);
  });

  it('the environment sets glibc malloc to 2 arenas (ADR 0024)', () => {
    expect(CONTROL_PLANE_ENV).toEqual({ MALLOC_ARENA_MAX: '2' });
  });

  it('npm run start:control-plane runs node with them', () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const command = scripts['start:control-plane']!.split('&&').pop()!.trim().split(/\s+/);
    expect(command).toEqual([...ENV_ASSIGNMENTS, 'node', ...CONTROL_PLANE_NODE_FLAGS, MAIN]);
  });

  it("the Dockerfile's CMD runs node with them, and every docker-compose control plane runs that CMD", () => {
    const cmd = read('Dockerfile')
      .split('\n')
      .find((l) => l.startsWith('CMD '));
    expect(JSON.parse(cmd!.slice('CMD '.length))).toEqual(['node', ...CONTROL_PLANE_NODE_FLAGS, MAIN]);
    // The image's environment: the final stage (after the last FROM), one `ENV name=value` each.
    const finalStage = read('Dockerfile').split(/^FROM /m).pop()!;
    const imageEnv = finalStage
      .split('\n')
      .filter((l) => l.startsWith('ENV '))
      .map((l) => l.slice('ENV '.length).trim());
    expect(imageEnv).toEqual(expect.arrayContaining(ENV_ASSIGNMENTS));
    const compose = parse(read('docker-compose.yml'), { merge: true }) as {
      services: Record<string, { command?: string[]; environment?: Record<string, string> }>;
    };
    const planes = Object.entries(compose.services).filter(
      ([, s]) => s.environment?.QL_PROFILE === 'cluster-control',
    );
    expect(planes.map(([name]) => name)).toEqual(['control-plane-1', 'control-plane-2']);
    for (const [name, s] of planes)
      expect({ name, command: s.command }).toEqual({ name, command: undefined });
  });
});
