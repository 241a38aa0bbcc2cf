// A jest environment that names the spec file which left handles open: after a file's tests and
// hooks, the worker process's active resources (sockets, timers, child processes) are compared with
// what it had before the file, and what is still there after a short settle is written to stderr
// with the file's name. "A worker process has failed to exit gracefully" names no file; this does.
const { setTimeout } = require('node:timers');
const { TestEnvironment } = require('jest-environment-node');

/** Resources that come and go with jest itself or with Node's own machinery. */
const IGNORED = new Set(['TTYWrap', 'PipeWrap', 'FSReqPromise', 'FSReqCallback', 'Immediate', 'FSEventWrap']);
const SETTLE_MS = 200;

function counts() {
  const byType = new Map();
  for (const type of process.getActiveResourcesInfo())
    if (!IGNORED.has(type)) byType.set(type, (byType.get(type) ?? 0) + 1);
  return byType;
}

class HandleCheckingEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
  }

  async setup() {
    await super.setup();
    this.before = counts();
  }

  async teardown() {
    await super.teardown();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const after = counts();
    const grown = [...after].filter(([type, n]) => n > (this.before.get(type) ?? 0));
    if (grown.length > 0)
      process.stderr.write(
        `handles left open by ${this.testPath}: ${grown
          .map(([type, n]) => `${type} +${n - (this.before.get(type) ?? 0)}`)
          .join(', ')}\n`,
      );
  }
}

module.exports = HandleCheckingEnvironment;
