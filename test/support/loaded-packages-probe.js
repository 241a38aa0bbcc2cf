'use strict';
/**
 * Preloaded into a real control plane (`NODE_OPTIONS=--require <this file>`) by
 * test/e2e/control-plane-footprint.e2e-spec.ts: on SIGUSR2 it writes one JSON line,
 * `{"msg":"loaded packages probe","packages":[…]}`, naming every npm package the process has loaded
 * through `require` so far (CommonJS files and CommonJS packages that ESM modules imported).
 */
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
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
});
