import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, ControlPlaneConfig, configTable, loadConfig, secretCipherOf } from './config/config';
import { COMMANDS, HELP, commandHelp, isHelpFlag } from './cli-help';
import { sqlitePathOf } from './core/plane-lock';
import { EXIT, describeStartFailure, redactDatabaseUrl } from './start-failure';

/* eslint-disable @typescript-eslint/no-require-imports -- each command loads only what it needs (below) */
type Persistence = typeof import('@ql/persistence');

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || isHelpFlag(command) || (command === 'help' && rest.length === 0)) {
    process.stdout.write(`${HELP}\n`);
    return EXIT.ok;
  }
  const topic = command === 'help' ? rest[0]! : command;
  if (!Object.hasOwn(COMMANDS, topic)) {
    process.stderr.write(`unknown command: ${topic}\n\n${HELP}\n`);
    return EXIT.config;
  }
  if (command === 'help' || rest.some(isHelpFlag)) {
    process.stdout.write(`${commandHelp(topic)}\n`);
    return EXIT.ok;
  }
  return run(command, rest);
}

async function run(command: string, args: string[]): Promise<number> {
  const config = loadConfig();
  switch (command) {
    case 'migrate': {
      const { parseDatabaseUrl, runMigrations } = require('@ql/persistence') as Persistence;
      parseArgs({ args, options: {} });
      const target = parseDatabaseUrl(config.databaseUrl);
      sayDatabase(config, target.dialect === 'sqlite' ? target.path : undefined);
      await runMigrations(target);
      process.stdout.write(`migrations applied (${target.dialect})\n`);
      return EXIT.ok;
    }
    case 'pki': {
      const { values } = parseArgs({
        args,
        options: {
          worker: { type: 'string', multiple: true },
          'no-workers': { type: 'boolean' },
          'server-name': { type: 'string', multiple: true },
        },
      });
      if (values['no-workers'] && values.worker?.length) {
        process.stderr.write(`--worker and --no-workers exclude each other\n${commandHelp(command)}\n`);
        return EXIT.config;
      }
      const { ensureDevPki } = require('./pki') as typeof import('./pki');
      const paths = await ensureDevPki(config.devPkiDir, {
        trustDomain: config.trustDomain,
        workers: values['no-workers'] ? [] : values.worker?.length ? values.worker : ['worker-1'],
        serverDnsNames: [...new Set(['localhost', ...(values['server-name'] ?? [])])],
      });
      process.stdout.write(`${JSON.stringify(paths, null, 2)}\n`);
      return EXIT.ok;
    }
    case 'api-key': {
      const { values } = parseArgs({
        args,
        options: { name: { type: 'string' }, role: { type: 'string' }, create: { type: 'boolean' } },
      });
      return withDatabase('api-key', config, values.create === true, async (core) => {
        const { AdminService } = require('./admin/admin.service') as typeof import('./admin/admin.service');
        const { repos, ids } = core;
        const service = new AdminService(
          repos.sessions,
          repos.apiKeys,
          repos.audit,
          ids,
          repos.revocations,
          repos.workerCertificates,
        );
        const key = await service.createApiKey({ id: 'cli' }, { name: values.name, role: values.role });
        // stdout is the JSON alone (`npm run -s api-key … | jq -r .token`); the advice goes to stderr.
        process.stdout.write(`${JSON.stringify(key, null, 2)}\n`);
        process.stderr.write('Store the token now: it is not shown again.\n');
        return EXIT.ok;
      });
    }
    case 'enroll-token': {
      const { parseEnrollTokenCommand, runEnrollTokenCommand } =
        require('./enrollment/enroll-token-command') as typeof import('./enrollment/enroll-token-command');
      const { ValidationError } = require('@ql/domain') as typeof import('@ql/domain');
      let parsed;
      try {
        parsed = parseEnrollTokenCommand(args);
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        process.stderr.write(`${error.message}\n${commandHelp(command)}\n`);
        return EXIT.config;
      }
      const enrollCommand = parsed;
      return withDatabase(command, config, false, async ({ repos, ids, clock }) => {
        const { Logger } = require('@nestjs/common') as typeof import('@nestjs/common');
        Logger.overrideLogger(false); // stdout is the command's answer
        const { EnrollmentTokensService } =
          require('./enrollment/enrollment-tokens.service') as typeof import('./enrollment/enrollment-tokens.service');
        const service = new EnrollmentTokensService(repos.enrollmentTokens, ids, clock);
        return runEnrollTokenCommand(
          enrollCommand,
          service,
          (text) => process.stdout.write(text),
          (text) => process.stderr.write(text),
        );
      });
    }
    case 'secret': {
      const { parseSecretCommand, runSecretCommand, valueFromStdin } =
        require('./secrets/secret-command') as typeof import('./secrets/secret-command');
      const { ValidationError } = require('@ql/domain') as typeof import('@ql/domain');
      let parsed;
      try {
        parsed = parseSecretCommand(args);
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        process.stderr.write(`${error.message}\n${commandHelp(command)}\n`);
        return EXIT.config;
      }
      const secretCommand = parsed;
      return withDatabase(command, config, false, async ({ repos }) => {
        const { Logger } = require('@nestjs/common') as typeof import('@nestjs/common');
        Logger.overrideLogger(false); // stdout is the command's answer
        const { SecretsService } =
          require('./secrets/secrets.service') as typeof import('./secrets/secrets.service');
        const { planeKeysRefusal } =
          require('./secrets/plane-keys-check') as typeof import('./secrets/plane-keys-check');
        return runSecretCommand(
          secretCommand,
          new SecretsService(repos.secrets),
          async () => {
            if (process.stdin.isTTY) process.stderr.write('secret value (end with Ctrl-D): ');
            const chunks: Buffer[] = [];
            for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
            return valueFromStdin(Buffer.concat(chunks));
          },
          (text) => process.stdout.write(text),
          (text) => process.stderr.write(text),
          // Issue 29 item 5: nothing a running control plane could not open (ADR 0050).
          (action) => planeKeysRefusal(repos.planeSecretKeys, secretCipherOf(config), action),
        );
      });
    }
    case 'env': {
      const { parseEnvCommand, runEnvCommand } =
        require('./env-vars/env-command') as typeof import('./env-vars/env-command');
      const { ValidationError } = require('@ql/domain') as typeof import('@ql/domain');
      let parsed;
      try {
        parsed = parseEnvCommand(args);
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        process.stderr.write(`${error.message}\n${commandHelp(command)}\n`);
        return EXIT.config;
      }
      const envCommand = parsed;
      return withDatabase(command, config, false, async ({ repos }) => {
        const { Logger } = require('@nestjs/common') as typeof import('@nestjs/common');
        Logger.overrideLogger(false); // stdout is the command's answer
        const { EnvVarsService } =
          require('./env-vars/env-vars.service') as typeof import('./env-vars/env-vars.service');
        const { planeKeysRefusal } =
          require('./secrets/plane-keys-check') as typeof import('./secrets/plane-keys-check');
        return runEnvCommand(
          envCommand,
          new EnvVarsService(repos.envVars),
          (text) => process.stdout.write(text),
          (text) => process.stderr.write(text),
          // Secret variables are secrets: nothing a running control plane could not open (ADR 0050).
          () => planeKeysRefusal(repos.planeSecretKeys, secretCipherOf(config), 'set'),
        );
      });
    }
    case 'bundle': {
      const { parseBundleCommand, runBundleCommand } =
        require('./bundles/bundle-command') as typeof import('./bundles/bundle-command');
      const { ValidationError } = require('@ql/domain') as typeof import('@ql/domain');
      let parsed;
      try {
        parsed = parseBundleCommand(args);
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        process.stderr.write(`${error.message}\n${commandHelp(command)}\n`);
        return EXIT.config;
      }
      const bundleCommand = parsed;
      return withDatabase(command, config, false, async ({ repos }) => {
        const { BundlesService } =
          require('./bundles/bundles.service') as typeof import('./bundles/bundles.service');
        const service = new BundlesService(repos.bundles, config);
        return runBundleCommand(
          bundleCommand,
          service,
          (text) => process.stdout.write(text),
          (text) => process.stderr.write(text),
        );
      });
    }
    case 'backup': {
      const { runBackupCommand } =
        require('./backup/sqlite-backup') as typeof import('./backup/sqlite-backup');
      return runBackupCommand(config, args, (path) => sayDatabase(config, path));
    }
    case 'openapi': {
      // Builds both applications' module graphs in preview mode: no database, no listener.
      const { values } = parseArgs({ args, options: { out: { type: 'string' } } });
      const { offlineOpenApiDocument } = require('./api-docs') as typeof import('./api-docs');
      const text = `${JSON.stringify(await offlineOpenApiDocument(config), null, 2)}\n`;
      if (values.out === undefined) {
        process.stdout.write(text);
        return EXIT.ok;
      }
      // Written whole or not at all: a failure (or `--help`, answered above) leaves the file as it was.
      writeFileSync(`${values.out}.tmp`, text);
      renameSync(`${values.out}.tmp`, values.out);
      process.stderr.write(`OpenAPI document written to ${values.out}\n`);
      return EXIT.ok;
    }
    default:
      process.stdout.write(`${configTable()}\n`);
      return EXIT.ok;
  }
}

interface CommandDatabase {
  readonly repos: import('@ql/persistence').Repositories;
  readonly ids: import('@ql/domain').IdGenerator;
  readonly clock: import('@ql/domain').Clock;
}

/**
 * Opens the control plane's database for a command that writes to it, after naming it on stderr
 * (ADR 0034). A missing SQLite file is refused (exit 2) unless `create`: a key or token there would
 * open no control plane that uses another database.
 */
async function withDatabase(
  command: string,
  config: ControlPlaneConfig,
  create: boolean,
  fn: (db: CommandDatabase) => Promise<number>,
): Promise<number> {
  const sqlitePath = sqlitePathOf(config.databaseUrl);
  sayDatabase(config, sqlitePath);
  if (sqlitePath && !existsSync(sqlitePath) && !create) {
    const what =
      command === 'api-key'
        ? 'a key'
        : command === 'secret'
          ? 'a secret'
          : command === 'bundle'
            ? 'a bundle'
            : command === 'env'
              ? 'an env var'
              : 'a token';
    process.stderr.write(
      `${command}: no database at ${resolve(sqlitePath)}: ${what} there would not open a control plane that uses ` +
        "another database. Set QL_DATABASE_URL to the control plane's database (the same as `npm start` " +
        'or `npm run migrate` used)' +
        (command === 'api-key' ? ', or pass --create to create a new SQLite database there.\n' : '.\n'),
    );
    return EXIT.config;
  }
  require('reflect-metadata');
  const { createIdGenerator, systemClock } = require('@ql/contracts') as typeof import('@ql/contracts');
  const persistence = require('@ql/persistence') as Persistence;
  const target = persistence.parseDatabaseUrl(config.databaseUrl);
  const db = await persistence.openDatabase(target, systemClock, target.dialect === 'sqlite');
  try {
    const ids = createIdGenerator();
    const secretCipher = secretCipherOf(config);
    return await fn({
      repos: persistence.createRepositories(db, ids, { secretCipher }),
      ids,
      clock: systemClock,
    });
  } finally {
    await db.close();
  }
}

/** Which database a command writes to, on stderr (stdout stays the command's output). */
function sayDatabase(config: ControlPlaneConfig, sqlitePath: string | undefined): void {
  const where = sqlitePath ? `sqlite:${resolve(sqlitePath)}` : redactDatabaseUrl(config.databaseUrl);
  const source = process.env.QL_DATABASE_URL ? 'QL_DATABASE_URL' : 'QL_DATABASE_URL unset: the default';
  process.stderr.write(`database: ${where} (${source})\n`);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    // A bad option is a usage error like a bad setting: one line and the command's help, exit 2.
    const usage = (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    if (usage) {
      process.stderr.write(`${(error as Error).message}\n${commandHelp(process.argv[2]!)}\n`);
      process.exit(EXIT.config);
    }
    const failure = describeStartFailure(error);
    process.stderr.write(`${failure.line.replace(/^control plane failed to start: /, '')}\n`);
    process.exit(error instanceof ConfigError ? EXIT.config : failure.exitCode);
  },
);
