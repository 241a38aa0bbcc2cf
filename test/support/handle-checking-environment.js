// A jest environment that names the spec file which left handles open: after a file's tests and
// hooks, the worker process's active resources (sockets, servers, timers, child processes) are
// compared with what it had before the file, and what is still there after a short settle is written
// to stderr with the file's name. What a file's leftovers open later (a reconnect timer, a retry) is
// caught when the next file starts in the same jest worker, and named after the file before it.
// "A worker process has failed to exit gracefully" names no file; this does.
const { appendFileSync, mkdirSync } = require('node:fs');
const { join } = require('node:path');
const { setTimeout } = require('node:timers');
const { TestEnvironment } = require('jest-environment-node');

/** Resources that come and go with jest itself or with Node's own machinery. */
const IGNORED = new Set(['TTYWrap', 'PipeWrap', 'FSReqPromise', 'FSReqCallback', 'Immediate', 'FSEventWrap']);
const SETTLE_MS = 200;

/** The last file this jest worker finished, and what was open then. */
let previous;

/**
 * test-results/jest-workers.log: each file's start and end and each worker's exit, by pid, written
 * synchronously. A worker force-killed at the end has no `exit` line: its last `end` names the file
 * it ran last, even when its event loop was blocked and could say nothing itself.
 */
const TRACE = join(__dirname, '..', '..', 'test-results', 'jest-workers.log');
function trace(what) {
  try {
    mkdirSync(join(TRACE, '..'), { recursive: true });
    appendFileSync(TRACE, `${new Date().toISOString()} ${process.pid} ${what}\n`);
  } catch {
    // a trace that cannot be written changes no test
  }
}
process.once('exit', (code) => trace(`exit ${code}`));

// jest ends a worker process that does not exit by itself within 500 ms of the end with SIGTERM ("a
// worker process has failed to exit gracefully"): say what still held it, and after which file.
process.once('SIGTERM', () => {
  trace(`SIGTERM after ${previous?.testPath ?? 'no file'}`);
  process.stderr.write(
    `jest worker ${process.pid} held open at its end, after ${previous?.testPath ?? 'no file'}: ${
      [...counts()].map(([type, n]) => `${type} ×${n}`).join(', ') || 'nothing listed'
    }\n`,
  );
  process.exit(143);
});

function counts() {
  const byType = new Map();
  for (const type of process.getActiveResourcesInfo())
    if (!IGNORED.has(type)) byType.set(type, (byType.get(type) ?? 0) + 1);
  return byType;
}

/** What `now` holds beyond `base`, as "Type +n", or '' when nothing grew. */
function growth(base, now) {
  return [...now]
    .filter(([type, n]) => n > (base.get(type) ?? 0))
    .map(([type, n]) => `${type} +${n - (base.get(type) ?? 0)}`)
    .join(', ');
}

class HandleCheckingEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
  }

  async setup() {
    trace(`start ${this.testPath}`);
    await super.setup();
    this.before = counts();
    if (previous) {
      const late = growth(previous.after, this.before);
      if (late) process.stderr.write(`handles opened after ${previous.testPath} ended: ${late}\n`);
    }
  }

  async teardown() {
    await super.teardown();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const after = counts();
    const left = growth(this.before, after);
    if (left) process.stderr.write(`handles left open by ${this.testPath}: ${left}\n`);
    previous = { testPath: this.testPath, after };
    trace(`end ${this.testPath}`);
  }
}

module.exports = HandleCheckingEnvironment;
