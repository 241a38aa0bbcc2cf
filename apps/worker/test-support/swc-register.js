'use strict';
/**
 * `node -r ./apps/worker/test-support/swc-register.js apps/worker/src/main.ts`: runs the TypeScript
 * sources directly, for tests that need a real worker process without a build. Each `.ts` file is
 * compiled with SWC (CommonJS, legacy decorators + metadata, like jest.config.js) when required, and
 * `@ql/<lib>` resolves to `libs/<lib>/src/index.ts` (like the tsconfig paths).
 *
 * The compiled code is cached on disk by the file's content (and SWC's version): the suite starts
 * hundreds of worker, control-plane and CLI processes, each of which would compile the same few
 * hundred files again. A cache entry is written whole (a rename), so concurrent processes never read
 * half of one; a corrupt or missing entry is compiled again. `QL_SWC_CACHE=off` turns it off.
 */
const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const crypto = require('node:crypto');
const os = require('node:os');
const { transformSync, version: swcVersion } = require('@swc/core');

const root = path.resolve(__dirname, '..', '..', '..');
const LIB = /^@ql\/([a-z0-9-]+)$/;

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, parent, isMain, options) {
  const lib = LIB.exec(request);
  if (lib) {
    const file = path.join(root, 'libs', lib[1], 'src', 'index.ts');
    if (fs.existsSync(file)) return file;
  }
  return resolveFilename.call(this, request, parent, isMain, options);
};

const OPTIONS = {
  sourceMaps: 'inline',
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    target: 'es2022',
  },
  module: { type: 'commonjs' },
};
const CACHE =
  process.env.QL_SWC_CACHE === 'off'
    ? undefined
    : path.join(
        os.tmpdir(),
        `ql-swc-cache-${crypto
          .createHash('sha256')
          .update(`${swcVersion}${JSON.stringify(OPTIONS)}`)
          .digest('hex')
          .slice(0, 12)}`,
      );

function compile(source, filename) {
  return transformSync(source, { filename, ...OPTIONS }).code;
}

function cached(source, filename) {
  const key = crypto.createHash('sha256').update(filename).update('\0').update(source).digest('hex');
  const file = path.join(CACHE, key.slice(0, 2), `${key}.js`);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    const code = compile(source, filename);
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const partial = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(partial, code);
      fs.renameSync(partial, file);
    } catch {
      // A cache that cannot be written only costs the next process a compile.
    }
    return code;
  }
}

require.extensions['.ts'] = function compileTypeScript(module, filename) {
  const source = fs.readFileSync(filename, 'utf8');
  module._compile(CACHE ? cached(source, filename) : compile(source, filename), filename);
};
