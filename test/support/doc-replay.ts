/**
 * The README's and docs/operations.md's commands, replayed as a new user types them (issue 29 items 7
 * and 8; test/e2e/readme-replay.e2e-spec.ts). The docs are the source: each fenced shell block is
 * marked `<!-- replay: <step> -->` (run by that step) or `<!-- no-replay: <id> -->` (listed, with its
 * reason, in the spec) on the line before its fence; the commands are read from the block and run in
 * one bash session (a terminal: `export`s and variables carry over), long-running ones (`npm start`,
 * `bin/ql-worker`) in terminals of their own, in a copy of the repository.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';

export interface DocBlock {
  readonly doc: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly mark?: { readonly replay: boolean; readonly id: string };
  /** The block's lines, its fence's indentation removed. */
  readonly body: string;
}

export const SHELL_LANGS = ['sh', 'bash', 'shell', 'console'];

/** Every fenced block of a Markdown text, with the replay mark on the last non-blank line before it. */
export function docBlocks(doc: string, text: string): DocBlock[] {
  const lines = text.split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    let end = i + 1;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end]!)) end++;
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const mark = /^\s*<!-- (replay|no-replay): (\S+) -->\s*$/.exec(lines[before] ?? '');
    blocks.push({
      doc,
      line: i + 1,
      lang: open[2]!,
      ...(mark ? { mark: { replay: mark[1] === 'replay', id: mark[2]! } } : {}),
      body: lines
        .slice(i + 1, end)
        .map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)))
        .join('\n'),
    });
    i = end;
  }
  return blocks;
}

export interface DocCommand {
  /** The command as the block writes it, continuation lines joined as bash reads them. */
  readonly text: string;
  /** The command without its comments: what bash runs. */
  readonly code: string;
  /** The comment lines just before it (what the user reads first: "stop the control plane (Ctrl-C)"). */
  readonly comments: readonly string[];
}

/**
 * The commands of a shell block, as bash would read them: a line continues while it ends in `\`,
 * `|` or `&&`, or leaves a quote open; comment-only lines are not commands (what they say is kept for
 * the command after them).
 */
export function blockCommands(body: string): DocCommand[] {
  const commands: DocCommand[] = [];
  let comments: string[] = [];
  let current: string[] = [];
  let code: string[] = [];
  let state: Quote & { code: string } = { quote: undefined, code: '' };
  for (const line of body.split('\n')) {
    if (current.length === 0) {
      if (line.trim() === '') continue;
      if (line.trim().startsWith('#')) {
        comments.push(line.trim());
        continue;
      }
    }
    current.push(line);
    // A comment starts only outside quotes: a line that opens with one carries on inside it.
    const inside = state.quote !== undefined;
    state = scan(line, state);
    code.push(inside && state.quote ? line : state.code.trimEnd());
    const end = state.code.trimEnd();
    if (state.quote || end.endsWith('\\') || end.endsWith('|') || end.endsWith('&&')) continue;
    commands.push({ text: current.join('\n'), code: code.join('\n').trim(), comments });
    current = [];
    code = [];
    comments = [];
  }
  if (current.length > 0) throw new Error(`an unfinished command in the block:\n${current.join('\n')}`);
  return commands;
}

interface Quote {
  quote: "'" | '"' | undefined;
  /** The line without its comment. */
  code?: string;
}

/** Where a line leaves bash's quoting (single, double, none), and its code before a comment. */
function scan(line: string, from: Quote): Quote & { code: string } {
  let quote = from.quote;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
    } else if (quote === '"') {
      if (c === '\\') i++;
      else if (c === '"') quote = undefined;
    } else if (c === '\\') i++;
    else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return { quote, code: line.slice(0, i) };
  }
  return { quote, code: line };
}

export interface CommandResult {
  readonly command: string;
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

const MARK = '__ql_replay_done__';

/**
 * One bash, read from a pipe: the user's terminal. Each command runs in it as typed (its `export`s and
 * variables stay for the next), with no stdin of its own, and its exit code, stdout and stderr are
 * returned when it ends.
 */
export class ShellSession {
  private readonly bash: ChildProcess;
  private out = '';
  private err = '';
  private readonly events = new EventEmitter();
  readonly transcript: string[] = [];

  constructor(
    readonly cwd: string,
    env: Record<string, string>,
  ) {
    // Its own process group: what a command left running is ended with it (`close`).
    this.bash = spawn('bash', ['--noprofile', '--norc'], {
      cwd,
      env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.bash.stdout!.on('data', (chunk: Buffer) => {
      this.out += chunk.toString('utf8');
      this.events.emit('data');
    });
    this.bash.stderr!.on('data', (chunk: Buffer) => {
      this.err += chunk.toString('utf8');
      this.events.emit('data');
    });
    this.bash.on('exit', () => this.events.emit('data'));
  }

  async run(command: string): Promise<CommandResult> {
    this.out = '';
    this.err = '';
    trace(`[${new Date().toISOString()}] running\n`);
    this.bash.stdin!.write(
      `{\n${command}\n} </dev/null\nprintf '\\n${MARK} %s\\n' "$?"; printf '\\n${MARK}\\n' >&2\n`,
    );
    const done = new RegExp(`\\n${MARK} (\\d+)\\n$`);
    for (;;) {
      const exit = done.exec(this.out);
      if (exit && this.err.endsWith(`\n${MARK}\n`)) {
        const result = {
          command,
          code: Number(exit[1]),
          stdout: this.out.slice(0, exit.index),
          stderr: this.err.slice(0, -`\n${MARK}\n`.length),
        };
        this.transcript.push(`$ ${command}\n${result.stdout}${result.stderr}[exit ${result.code}]`);
        trace(`${this.transcript.at(-1)}\n`);
        return result;
      }
      if (this.bash.exitCode !== null) throw new Error(`the shell exited running: ${command}`);
      await once(this.events, 'data');
    }
  }

  /** The exported environment now (what a command started here gets). */
  async environment(): Promise<Record<string, string>> {
    const { stdout } = await this.run('env -0');
    return Object.fromEntries(
      stdout
        .split('\0')
        .filter((kv) => kv.includes('='))
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
  }

  /** Ends the shell and anything a command of it still runs (a command that hung: the test failed). */
  async close(): Promise<void> {
    if (this.bash.exitCode !== null || this.bash.signalCode !== null) return;
    const exited = once(this.bash, 'exit');
    try {
      process.kill(-this.bash.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    await exited;
  }
}

/**
 * A long-running command in a terminal of its own (`npm start`, `bin/ql-worker`): its own process
 * group, as a terminal's foreground job; Ctrl-C is SIGINT to that group. Its stdout's JSON lines are
 * kept to be awaited.
 */
export class Terminal {
  readonly lines: (Record<string, unknown> & { msg?: string })[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Its exit, once nothing it started writes to the terminal any more (its output closed). */
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;
  private readonly events = new EventEmitter();

  constructor(
    readonly command: string,
    cwd: string,
    env: Record<string, string>,
  ) {
    this.child = spawn('bash', ['-c', command], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = once(this.child, 'exit').then(([code, signal]) => {
      this.events.emit('line');
      return { code: code as number | null, signal: signal as NodeJS.Signals | null };
    });
    this.closed = Promise.all([
      this.exited,
      once(this.child.stdout!, 'close'),
      once(this.child.stderr!, 'close'),
    ]).then(([exit]) => exit);
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      trace(`[${command.slice(0, 40)}] ${line}\n`);
      try {
        this.lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        this.lines.push({ text: line });
      }
      this.events.emit('line');
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => {
      trace(`[${command.slice(0, 40)} stderr] ${line}\n`);
      this.stderr.push(line);
      this.events.emit('line');
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Ctrl-C, and the end of everything it started: after `graceMs` (a stop that hangs, the test
   * failed) SIGKILL to its group and to the children the quickstart put in groups of their own.
   */
  async stop(graceMs = 20_000): Promise<void> {
    if (!this.running) return;
    this.interrupt();
    const timer = setTimeout(() => {
      for (const pid of [this.child.pid!, ...this.detachedChildren()])
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
    }, graceMs);
    await this.closed.finally(() => clearTimeout(timer));
  }

  /** The control plane and worker a quickstart started, each in a process group of its own. */
  private detachedChildren(): number[] {
    return this.lines
      .filter(
        (l) => typeof l.msg === 'string' && l.msg.startsWith('quickstart: ') && typeof l.pid === 'number',
      )
      .map((l) => l.pid as number);
  }

  /** Ctrl-C: SIGINT to the terminal's foreground process group. */
  interrupt(): void {
    if (this.running) process.kill(-this.child.pid!, 'SIGINT');
  }

  /** The first line `match` accepts, awaited as lines arrive; fails if the command ends first. */
  async until(
    what: string,
    match: (line: Record<string, unknown> & { msg?: string }) => boolean,
    deadlineMs = 60_000,
    from = 0,
  ) {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      const found = this.lines.slice(from).find(match);
      if (found) return found;
      if (!this.running) throw new Error(`\`${this.command}\` ended before ${what}\n${this.transcript()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}\n${this.transcript()}`);
      const settled = new AbortController();
      await Promise.race([
        once(this.events, 'line', { signal: settled.signal }),
        delay(left, undefined, { signal: settled.signal }),
      ])
        .catch(() => undefined)
        .finally(() => settled.abort());
    }
  }

  transcript(): string {
    return [...this.lines.map((l) => JSON.stringify(l)), ...this.stderr].join('\n');
  }
}

/** The entry points package.json's scripts and bin/ql-worker start from `dist/`. */
const DIST_ENTRIES: Record<string, string> = {
  'dist/apps/control-plane/src/quickstart.js': 'apps/control-plane/src/quickstart.ts',
  'dist/apps/control-plane/src/main.js': 'apps/control-plane/src/main.ts',
  'dist/apps/control-plane/src/cli.js': 'apps/control-plane/src/cli.ts',
  'dist/apps/worker/src/main.js': 'apps/worker/src/main.ts',
  'dist/apps/worker/bundle/main.js': 'apps/worker/src/main.ts',
};

/**
 * A copy of the repository as a fresh clone has it (the files git tracks, and new ones not ignored)
 * in `dest`, with this checkout's `node_modules` linked (no `npm ci` again) and a `dist/` whose entry
 * points run the TypeScript sources through SWC (as every e2e test does; `npm run build` itself is
 * replayed by test/e2e/compose.e2e-spec.ts): a real build is a minute of tsc, more than the replay.
 * Its `dist/.built` stamp is newer than every source, so `npm start` and the CLI scripts start at once.
 */
export function copyRepository(root: string, dest: string): void {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((file) => file && existsSync(join(root, file)));
  for (const file of files) {
    mkdirSync(dirname(join(dest, file)), { recursive: true });
    cpSync(join(root, file), join(dest, file));
  }
  symlinkSync(join(root, 'node_modules'), join(dest, 'node_modules'));
  const register = join(dest, 'apps/worker/test-support/swc-register.js');
  for (const [entry, source] of Object.entries(DIST_ENTRIES)) {
    mkdirSync(dirname(join(dest, entry)), { recursive: true });
    writeFileSync(
      join(dest, entry),
      [
        "'use strict';",
        "// The replay's build (test/support/doc-replay.ts): this entry point runs its TypeScript source.",
        `const register = ${JSON.stringify(register)};`,
        "if (!process.execArgv.includes(register)) process.execArgv.push('-r', register);",
        'require(register);',
        `require(${JSON.stringify(join(dest, source))});`,
        '',
      ].join('\n'),
    );
  }
  writeFileSync(join(dest, 'dist/.built'), '');
}

/** A JSON answer (curl's output), or undefined when it is not JSON. */
export function jsonOf(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** `QL_REPLAY_LOG=<file>`: every command, its output and exit code, and every terminal's lines, as they come. */
function trace(text: string): void {
  if (process.env.QL_REPLAY_LOG) appendFileSync(process.env.QL_REPLAY_LOG, text);
}

export const readText = (path: string) => readFileSync(path, 'utf8');
