import { closeSync, openSync } from 'node:fs';
import { isatty } from 'node:tty';

/**
 * Logging that survives a closed terminal or pipe (ADR 0034). When the terminal is closed (tmux
 * kill-session, an SSH drop) a write to it fails with EIO; when the reader of a pipe is gone, EPIPE.
 * Either arrives as an `error` event on process.stdout/stderr, which would crash the process in the
 * middle of its drain. Once a stream failed, its lines are dropped: the process still stops in order.
 */
const gone = new WeakSet<NodeJS.WritableStream>();
const watched = new WeakSet<NodeJS.WritableStream>();
let guarded = false;

function watch(stream: NodeJS.WritableStream): void {
  if (watched.has(stream)) return;
  watched.add(stream);
  stream.on('error', () => gone.add(stream));
}

/** Once per process, before the first log line: stdout/stderr errors mark the stream gone. */
export function guardStdio(): void {
  if (guarded) return;
  guarded = true;
  watch(process.stdout);
  watch(process.stderr);
  // Node restores the terminal's settings at exit and aborts (SIGABRT, a core dump) when the terminal
  // was hung up: a descriptor that no longer is the same file is skipped, so point it at /dev/null.
  const terminals = [0, 1, 2].filter((fd) => isatty(fd));
  process.on('exit', () => {
    for (const fd of terminals) {
      if (isatty(fd)) continue;
      try {
        closeSync(fd);
        openSync('/dev/null', 'r+'); // the lowest free descriptor: the one just closed
      } catch {
        // nothing left to protect
      }
    }
  });
}

/** One write to stdout or stderr that never throws and never crashes on a closed reader. */
export function writeStdio(stream: NodeJS.WritableStream, text: string): void {
  watch(stream);
  if (gone.has(stream)) return;
  try {
    stream.write(text);
  } catch {
    gone.add(stream); // a synchronous EIO/EPIPE/EBADF
  }
}

export const writeOut = (text: string): void => writeStdio(process.stdout, text);
export const writeErr = (text: string): void => writeStdio(process.stderr, text);
