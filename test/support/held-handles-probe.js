'use strict';
/**
 * Preloaded into a real worker process (`NODE_OPTIONS=--require <this file>`) by
 * test/e2e/remote-runs-idle-worker.e2e-spec.ts: on SIGUSR2 it writes one JSON line,
 * `{"msg":"held handles probe","timers":[…],"sockets":n,"children":n,"refed":[…]}`, describing what the
 * process holds right now: every pending timer (ref'd or not, with its delay), the live sockets and
 * child processes, and the ref'd resources that keep the process alive. Timers and sockets are
 * tracked with an async hook from the first line the process runs, so unref'd ones are seen too
 * (`process.getActiveResourcesInfo()` lists only ref'd resources).
 */
const { createHook } = require('node:async_hooks');

const live = new Map();
const SOCKET = /^(TCPWRAP|TLSWRAP)$/;
createHook({
  init(id, type, _trigger, resource) {
    if (type === 'Timeout' || SOCKET.test(type) || type === 'PROCESSWRAP') live.set(id, { type, resource });
  },
  destroy(id) {
    live.delete(id);
  },
}).enable();

process.on('SIGUSR2', () => {
  const timers = [];
  let sockets = 0;
  let children = 0;
  for (const { type, resource } of live.values()) {
    if (type === 'Timeout') {
      // A fired one-shot timer is destroyed later (at GC); `_destroyed` says it is over already.
      if (!resource._destroyed) timers.push({ delayMs: resource._idleTimeout, ref: resource.hasRef() });
    } else if (type === 'PROCESSWRAP') {
      children++;
    } else {
      sockets++;
    }
  }
  const line = {
    time: new Date().toISOString(),
    level: 'info',
    msg: 'held handles probe',
    timers: timers.sort((a, b) => a.delayMs - b.delayMs),
    sockets,
    children,
    refed: process.getActiveResourcesInfo().sort(),
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
});
