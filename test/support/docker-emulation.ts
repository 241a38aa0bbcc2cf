/**
 * Docker stand-ins for tests of the deployment artefacts on a machine without Docker:
 * - `parseDockerfile` reads the Dockerfile's stages and instructions;
 * - `replayImage` rebuilds the image's file layout in temp folders by replaying its COPY and build
 *   steps, so a test runs the very `dist/` and dependencies the image would hold;
 * - `loadCompose` parses docker-compose.yml (anchors and `<<` merges) with `${VAR:-default}`
 *   interpolated as on a machine with no such variables set.
 */
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix, resolve, sep } from 'node:path';
import { parse } from 'yaml';

export const REPO_ROOT = resolve(__dirname, '..', '..');

export interface Instruction {
  op: string;
  args: string;
}
export interface Stage {
  name: string;
  from: string;
  instructions: Instruction[];
}

/** Stages of a Dockerfile: `\` continuations joined, comments dropped, `${ARG}` in FROM resolved. */
export function parseDockerfile(text: string): Stage[] {
  const joined = text.replace(/\\\n/g, ' ');
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const raw of joined.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const [, word, rest] = /^(\S+)\s+(.*)$/.exec(line) ?? [];
    if (!word || rest === undefined) throw new Error(`Dockerfile: cannot read "${line}"`);
    const op = word.toUpperCase();
    const text = rest.replace(/\s+/g, ' ');
    if (op === 'FROM') {
      const [image, as, name] = text.split(' ');
      const from = image!.replace(/\$\{(\w+)\}/g, (_, v: string) => args[v] ?? '');
      stages.push({
        name: as?.toUpperCase() === 'AS' ? name! : String(stages.length),
        from,
        instructions: [],
      });
    } else if (op === 'ARG' && stages.length === 0) {
      const [name, value] = text.split('=');
      args[name!] = value ?? '';
    } else if (stages.length > 0) {
      stages[stages.length - 1]!.instructions.push({ op, args: text });
    }
  }
  return stages;
}

export const instructions = (stage: Stage, op: string): string[] =>
  stage.instructions.filter((i) => i.op === op).map((i) => i.args);

/** The exec form of CMD/ENTRYPOINT (`["a", "b"]`). */
export function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) {
    throw new Error(`expected the exec form ["…"], got ${args}`);
  }
  return parsed as string[];
}

export function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    // `node` in a command is the node running the tests.
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    HOME: process.env.HOME ?? '',
    ...options.env,
  };
  return new Promise((done) => {
    execFile(command, args, { cwd: options.cwd, env, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

export interface ReplayedImage {
  /** The final stage's WORKDIR on this machine: services run here. */
  root: string;
  /** Packages the final stage's `apt-get install` steps add to the base image. */
  packages: ReadonlySet<string>;
  /**
   * PATH for the image's processes: this machine's, except that a task runtime the image would not
   * have (TASK_RUNTIMES) is shadowed by a stub that fails as a missing command does (exit 127).
   */
  path: string;
  remove(): void;
}

/**
 * Task runtimes (the commands `local-process` runs) and where the image gets each: `sh` and `node`
 * are in the `node:<version>-<debian>-slim` base image; `python3` is not, so the runtime stage must
 * install the package.
 */
export const TASK_RUNTIMES: Readonly<Record<string, 'base image' | { package: string }>> = {
  sh: 'base image',
  node: 'base image',
  python3: { package: 'python3' },
};

/**
 * Rebuilds the image's files without Docker. Each stage gets a temp folder standing for its WORKDIR;
 * `COPY` from the build context copies from this checkout, `COPY --from=<stage>` from that stage's
 * folder. `RUN npm ci` links this checkout's node_modules (`--omit=dev`: only the packages the
 * lockfile does not mark dev, so code needing a devDependency fails here as in the image);
 * `RUN npm run build` runs its package.json script; other RUN steps (apt-get, chown, the native rebuild) are not replayed,
 * but the final stage's `apt-get install` packages decide which task runtimes its PATH offers (`path`).
 */
export async function replayImage(stages: Stage[]): Promise<ReplayedImage> {
  const base = mkdtempSync(join(tmpdir(), 'ql-image-'));
  const folders = new Map<string, StageFolder>();
  let packages = new Set<string>();
  try {
    for (const stage of stages) {
      packages = new Set(instructions(stage, 'RUN').flatMap(aptPackages));
      const workdir = instructions(stage, 'WORKDIR');
      if (workdir.length !== 1) throw new Error(`stage ${stage.name}: expected one WORKDIR`);
      const folder = { root: join(base, stage.name), workdir: workdir[0]! };
      mkdirSync(folder.root);
      folders.set(stage.name, folder);
      for (const { op, args } of stage.instructions) {
        if (op === 'COPY') copy(args, folder, folders);
        if (op === 'RUN') await replayRun(args, folder.root, stage.name);
      }
    }
  } catch (error) {
    rmSync(base, { recursive: true, force: true });
    throw error;
  }
  const stubs = join(base, 'missing-commands');
  mkdirSync(stubs);
  for (const [command, source] of Object.entries(TASK_RUNTIMES)) {
    if (source === 'base image' || packages.has(source.package)) continue;
    const stub = `#!/bin/sh\necho "${command}: not found (not installed in the image)" >&2\nexit 127\n`;
    writeFileSync(join(stubs, command), stub, { mode: 0o755 });
  }
  return {
    root: folders.get(stages[stages.length - 1]!.name)!.root,
    packages,
    path: `${stubs}:${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    remove: () => rmSync(base, { recursive: true, force: true }),
  };
}

/** The packages of each `apt-get install` step in a RUN instruction (options left out). */
export function aptPackages(run: string): string[] {
  return run
    .split('&&')
    .map((step) => /^\s*apt-get install (.*)$/.exec(step.trim())?.[1] ?? '')
    .flatMap((args) => args.split(/\s+/).filter((word) => word && !word.startsWith('-')));
}

interface StageFolder {
  root: string;
  workdir: string;
}

/** A path in a stage's image, as a path in its folder (only paths below WORKDIR are replayed). */
function local(folder: StageFolder, p: string): string {
  const rel = posix.relative(folder.workdir, posix.resolve(folder.workdir, p));
  if (rel.startsWith('..')) throw new Error(`${p} is outside WORKDIR ${folder.workdir}`);
  return join(folder.root, rel);
}

/** A COPY instruction's parts: `--from` stage (undefined: the build context), sources, destination. */
export function copyParts(args: string): { from?: string; paths: string[]; dest: string } {
  const words = args.split(' ');
  const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
  const paths = words.filter((w) => !w.startsWith('--'));
  const dest = paths.pop()!;
  return { from, paths, dest };
}

function copy(args: string, folder: StageFolder, folders: Map<string, StageFolder>): void {
  const { from, paths, dest } = copyParts(args);
  if (paths.length === 0 || paths.some((p) => /[*?[]/.test(p))) throw new Error(`COPY ${args}: unsupported`);
  for (const src of paths) {
    const fromFolder = from === undefined ? undefined : folders.get(from);
    if (from !== undefined && !fromFolder) throw new Error(`COPY ${args}: no stage ${from}`);
    const source = fromFolder ? local(fromFolder, src) : join(REPO_ROOT, src);
    if (!existsSync(source)) throw new Error(`COPY ${args}: ${src} does not exist`);
    const into = dest.endsWith('/') || paths.length > 1;
    const target = into ? join(local(folder, dest), basename(src)) : local(folder, dest);
    if (target.split(sep).includes('node_modules')) {
      // The linked package already is the built one (see linkNodeModules): nothing to write there.
      if (!existsSync(target)) throw new Error(`COPY ${args}: ${target} is not in the installed packages`);
      continue;
    }
    mkdirSync(dirname(target), { recursive: true });
    cpSync(source, target, { recursive: true });
  }
}

async function replayRun(args: string, root: string, stage: string): Promise<void> {
  for (const step of args.split('&&').map((s) => s.trim())) {
    if (/^npm ci\b/.test(step)) linkNodeModules(root, /--omit=dev\b/.test(step));
    if (step === 'npm run build') {
      // The package.json script, with tsc told not to type-check: `npm test` type-checks the same
      // files, and the emitted files are the same.
      const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
        scripts: { build: string };
      };
      const script = pkg.scripts.build.replace(/\btsc -p\b/g, 'tsc --noCheck -p');
      const bin = join(root, 'node_modules', '.bin');
      const result = await run('sh', ['-c', script], {
        cwd: root,
        env: { PATH: `${bin}:${process.env.PATH}` },
      });
      if (result.code !== 0)
        throw new Error(`stage ${stage}: npm run build failed\n${result.stdout}${result.stderr}`);
    }
  }
}

function linkNodeModules(root: string, omitDev: boolean): void {
  const installed = join(REPO_ROOT, 'node_modules');
  if (!omitDev) {
    symlinkSync(installed, join(root, 'node_modules'), 'dir');
    return;
  }
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (entry.dev || !/^node_modules\/(@[^/]+\/)?[^/]+$/.test(key)) continue;
    mkdirSync(dirname(join(root, key)), { recursive: true });
    symlinkSync(join(REPO_ROOT, key), join(root, key), 'dir');
  }
}

export interface ComposeService {
  image?: string;
  build?: string | { context: string };
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  restart?: string;
  stop_grace_period?: string;
}
export interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

/** `${VAR:-default}` and `${VAR}` as Compose reads them with none of the variables set; `$$` is `$`. */
export function interpolate(value: unknown): unknown {
  if (typeof value === 'string')
    return value.replace(/\$\$|\$\{(\w+)(?::?-([^}]*))?\}/g, (all: string, _v, d = '') =>
      all === '$$' ? '$' : d,
    );
  if (Array.isArray(value)) return value.map(interpolate);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v)]));
  }
  return value;
}

export function loadCompose(file = join(REPO_ROOT, 'docker-compose.yml')): ComposeFile {
  return interpolate(parse(readFileSync(file, 'utf8'), { merge: true })) as ComposeFile;
}

/** Compose durations such as `15s`, `1m30s`, `500ms`. */
export function durationMs(text: string): number {
  let total = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)(ms|s|m|h)/g)) {
    total += Number(n) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as 'ms' | 's' | 'm' | 'h'];
  }
  return total;
}
