import { ChildProcess, spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';

export type LogLine = Record<string, unknown> & { msg?: string };
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface LoggedProcessOptions {
  cwd: string;
  /** The whole environment besides PATH and HOME: no QL_* setting leaks in from the test run. */
  env: Record<string, string>;
}

/** A real child process whose stdout is JSON log lines (a control plane or a worker). */
export class LoggedProcess {
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly events = new EventEmitter();
  readonly exited: Promise<ProcessExit>;
  private readonly child: ChildProcess;

  constructor(command: string, args: string[], options: LoggedProcessOptions) {
    this.child = spawn(command, args, {
      cwd: options.cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = once(this.child, 'exit').then(([code, signal]) => {
      this.events.emit('exit');
      return { code: code as number | null, signal: signal as NodeJS.Signals | null };
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line) as LogLine);
      } catch {
        this.lines.push({ msg: `(not JSON) ${line}` });
      }
      this.events.emit('line');
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => this.stderr.push(line));
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Closes the reading ends of its stdout and stderr pipes: its next writes fail with EPIPE. */
  closeOutput(): void {
    this.child.stdout!.destroy();
    this.child.stderr!.destroy();
  }

  /**
   * Re-checks `condition` each time the process writes a log line (and every `pollMs`, if given, for
   * conditions outside it, such as a probe), so progress is awaited as events; fails at the deadline
   * or if the process exits first.
   */
  async until<T>(
    what: string,
    condition: () => Promise<T | undefined>,
    { deadlineMs = 20_000, pollMs }: { deadlineMs?: number; pollMs?: number } = {},
  ): Promise<T> {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      const value = await condition();
      if (value !== undefined) return value;
      if (!this.running) throw new Error(`process exited while waiting for ${what}\n${this.transcript()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}\n${this.transcript()}`);
      // Whichever comes first; the abort removes the listeners and the timer of the others.
      const settled = new AbortController();
      const { signal } = settled;
      await Promise.race([
        once(this.events, 'line', { signal }),
        once(this.events, 'exit', { signal }),
        delay(Math.min(left, pollMs ?? left), undefined, { signal }),
      ]).finally(() => settled.abort());
    }
  }

  messages(): string[] {
    return this.lines.map((l) => String(l.msg));
  }

  transcript(): string {
    return [...this.lines.map((l) => JSON.stringify(l)), ...this.stderr].join('\n');
  }
}
