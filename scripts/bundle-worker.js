'use strict';
/**
 * `node scripts/bundle-worker.js` (the last step of `npm run build`): the worker's entry bundled into
 * one file, dist/apps/worker/bundle/main.js, what bin/ql-worker starts (ADR 0049). It bundles the
 * compiled JavaScript (dist/apps/worker/src/main.js), not the TypeScript sources: tsc has already
 * written the decorators' metadata Nest's injection reads (esbuild does not emit it).
 *
 * Why it pays (ADR 0049 has the figures): V8 keeps the source text of every script it loaded, and the
 * unbundled worker loads ~300 CommonJS files with their comments and indentation. The bundle is
 * whitespace- and syntax-minified and ASCII-only (a single non-Latin-1 character would make V8 hold
 * the whole text as a two-byte string, twice its size); rxjs is taken from its ES-module build so the
 * operators the worker never uses are left out. Identifiers are not renamed: Nest reads class names.
 *
 * Left outside the bundle, loaded from node_modules at run time if ever:
 * - better-sqlite3: native (the journal's kernel lock, ADR 0029);
 * - packages Nest loads only for features the worker does not use (HTTP adapters, microservices,
 *   websockets, validation and serialization pipes, file-type checks); the optional ones are not
 *   even installed.
 */
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const ENTRY = join(root, 'dist/apps/worker/src/main.js');
const OUT = join(root, 'dist/apps/worker/bundle/main.js');
/** The files the bundle holds, by package (test/e2e/worker-footprint.e2e-spec.ts reads it). */
const INPUTS = join(root, 'dist/apps/worker/bundle/inputs.json');

const EXTERNAL = [
  'better-sqlite3',
  '@nestjs/microservices',
  '@nestjs/microservices/*',
  '@nestjs/websockets',
  '@nestjs/websockets/*',
  '@nestjs/platform-express',
  'class-validator',
  'class-transformer',
  'file-type',
];

/** rxjs resolves to its CommonJS build under the `node` condition; its ES-module build tree-shakes. */
const RXJS_ESM = {
  rxjs: 'node_modules/rxjs/dist/esm/index.js',
  'rxjs/operators': 'node_modules/rxjs/dist/esm/operators/index.js',
};

const rxjsEsm = {
  name: 'rxjs-esm',
  setup(build) {
    build.onResolve({ filter: /^rxjs(\/operators)?$/ }, (args) => ({
      path: join(root, RXJS_ESM[args.path]),
      sideEffects: false,
    }));
    build.onResolve({ filter: /[\\/]rxjs[\\/]dist[\\/]esm[\\/]/ }, () => ({ sideEffects: false }));
  },
};

async function main() {
  if (!existsSync(ENTRY)) {
    process.stderr.write(`bundle-worker: ${ENTRY} is missing: run tsc first (npm run build)\n`);
    return 1;
  }
  const esbuild = require('esbuild');
  const result = await esbuild.build({
    entryPoints: [ENTRY],
    outfile: OUT,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20', // the oldest engine package.json allows
    external: EXTERNAL,
    plugins: [rxjsEsm],
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    charset: 'ascii',
    sourcemap: false,
    logLevel: 'warning',
    metafile: true,
  });
  if (result.errors.length > 0) return 1;
  writeFileSync(INPUTS, `${JSON.stringify(Object.keys(result.metafile.inputs).sort(), null, 1)}\n`);
  // eslint-disable-next-line no-control-regex
  if (/[^\x00-\x7f]/.test(readFileSync(OUT, 'latin1'))) {
    process.stderr.write(`bundle-worker: ${OUT} is not ASCII-only\n`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`bundle-worker: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
