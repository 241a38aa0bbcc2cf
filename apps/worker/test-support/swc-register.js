'use strict';
/**
 * `node -r ./apps/worker/test-support/swc-register.js apps/worker/src/main.ts`: runs the TypeScript
 * sources directly, for tests that need a real worker process without a build. Each `.ts` file is
 * compiled with SWC (CommonJS, legacy decorators + metadata, like jest.config.js) when required, and
 * `@ql/<lib>` resolves to `libs/<lib>/src/index.ts` (like the tsconfig paths).
 */
const fs = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const { transformSync } = require('@swc/core');

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

require.extensions['.ts'] = function compileTypeScript(module, filename) {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    sourceMaps: 'inline',
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  });
  module._compile(code, filename);
};
