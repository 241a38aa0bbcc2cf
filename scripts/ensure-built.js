'use strict';
/**
 * `node scripts/ensure-built.js`: builds `dist/` only when a source is newer than the last good build
 * (the `dist/.built` stamp `npm run build` writes), so `npm start`, `npm run api-key` … start at once
 * on a built tree. The build writes over `dist/` in place and never deletes it: a running server keeps
 * the files it loaded.
 */
const { spawnSync } = require('node:child_process');
const { readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const SOURCES = ['apps', 'libs', 'migrations', 'bench'];
const CONFIGS = ['package.json', 'tsconfig.json', 'tsconfig.build.json'];

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** The newest modification time of a source (TypeScript, the console's TSX, CSS and HTML; tests excluded). */
function newestSource(dir) {
  let newest = mtime(dir) ?? 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (/\.(ts|tsx|css|html)$/.test(entry.name) && !entry.name.endsWith('.spec.ts'))
      newest = Math.max(newest, mtime(path));
  }
  return newest;
}

const built = mtime(join(root, 'dist', '.built'));
const newest = Math.max(
  ...SOURCES.map((dir) => (mtime(join(root, dir)) === undefined ? 0 : newestSource(join(root, dir)))),
  ...CONFIGS.map((file) => mtime(join(root, file)) ?? 0),
);
if (built === undefined || newest > built) {
  process.stderr.write(built === undefined ? 'building dist/ …\n' : 'sources changed: rebuilding dist/ …\n');
  const npm = process.env.npm_execpath
    ? [process.execPath, [process.env.npm_execpath]]
    : [process.platform === 'win32' ? 'npm.cmd' : 'npm', []];
  const result = spawnSync(npm[0], [...npm[1], 'run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
  process.exit(result.status ?? 1);
}
