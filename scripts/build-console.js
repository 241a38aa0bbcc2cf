'use strict';
/**
 * `node scripts/build-console.js [outdir]`: bundles the web console (apps/console) with esbuild into
 * `outdir` (default dist/console): index.html, assets/app.js (minified, no source maps shipped),
 * assets/console.css. `npm run build` runs it; the admin listener serves that folder at `/` (ADR 0052).
 */
const { build } = require('esbuild');
const { copyFileSync, mkdirSync } = require('node:fs');
const { join, resolve } = require('node:path');

const root = join(__dirname, '..');
const src = join(root, 'apps', 'console');

async function buildConsole(outdir) {
  mkdirSync(join(outdir, 'assets'), { recursive: true });
  await build({
    entryPoints: [join(src, 'src', 'main.tsx')],
    outfile: join(outdir, 'assets', 'app.js'),
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['chrome110', 'firefox115', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: join(src, 'tsconfig.json'),
    legalComments: 'none',
    logLevel: 'warning',
  });
  await build({
    entryPoints: [join(src, 'src', 'console.css')],
    outfile: join(outdir, 'assets', 'console.css'),
    bundle: true,
    minify: true,
    logLevel: 'warning',
  });
  copyFileSync(join(src, 'index.html'), join(outdir, 'index.html'));
}

module.exports = { buildConsole };

if (require.main === module) {
  buildConsole(resolve(process.argv[2] ?? join(root, 'dist', 'console'))).catch((error) => {
    process.stderr.write(`console build failed: ${error.message}\n`);
    process.exit(1);
  });
}
