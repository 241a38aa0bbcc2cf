'use strict';
/**
 * Preloaded into a real control plane (`NODE_OPTIONS=--require <this file>`) by
 * test/e2e/control-plane-footprint.e2e-spec.ts: on SIGUSR2 it writes one JSON line,
 * `{"msg":"loaded packages probe","packages":[…]}`, naming every npm package the process has loaded
 * through `require` so far (CommonJS files and CommonJS packages that ESM modules imported), and
 * `dateTimeFormats`, how many `Intl.DateTimeFormat`s were really built (the first one loads ICU's
 * locale and time-zone data, ADR 0024).
 */
let dateTimeFormats = 0;
Intl.DateTimeFormat = new Proxy(Intl.DateTimeFormat, {
  construct(target, args, newTarget) {
    dateTimeFormats++;
    return Reflect.construct(target, args, newTarget);
  },
  apply(target, self, args) {
    dateTimeFormats++;
    return Reflect.apply(target, self, args);
  },
});
process.on('SIGUSR2', () => {
  const packages = new Set();
  for (const file of Object.keys(require.cache)) {
    const at = file.lastIndexOf('/node_modules/');
    if (at < 0) continue;
    const parts = file.slice(at + '/node_modules/'.length).split('/');
    packages.add(parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]);
  }
  const line = {
    time: new Date().toISOString(),
    level: 'info',
    msg: 'loaded packages probe',
    packages: [...packages].sort(),
    dateTimeFormats,
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
});
