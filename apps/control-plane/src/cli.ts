import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, ControlPlaneConfig, configTable, loadConfig, secretCipherOf } from './config/config';
import { EXIT, describeStartFailure, redactDatabaseUrl } from './start-failure';

interface Command {
  readonly usage: string;
  readonly summary: string;
  readonly options?: readonly (readonly [string, string])[];
}

/* eslint-disable @typescript-eslint/no-require-imports -- each command loads only what it needs (below) */
type Persistence = typeof import('@ql/persistence');

/** Each command loads its modules on use: `--help` must not pay for Nest, TypeORM and pg. */
const COMMANDS: Record<string, Command> = {
  migrate: {
    usage: 'migrate',
    summary:
      'apply the database migrations to QL_DATABASE_URL (SQLite or PostgreSQL; creates a new SQLite file)',
  },
  pki: {
    usage: 'pki [--worker <id> ... | --no-workers] [--server-name <dns> ...]',
    summary:
      'create the development PKI in QL_DEV_PKI_DIR: CA, server certificate, worker issuer and worker certificates',
    options: [
      ['--worker <id>', 'a worker certificate to create (repeatable; default: worker-1)'],
      ['--no-workers', 'no worker certificate: the workers enroll with a token (enroll-token, ADR 0045)'],
      ['--server-name <dns>', 'a DNS name for the server certificate besides localhost (repeatable)'],
    ],
  },
  'api-key': {
    usage: 'api-key --name <name> --role admin|viewer [--create]',
    summary:
      'create an API key in QL_DATABASE_URL (named on stderr) and print its token once (only its digest is stored)',
    options: [
      ['--name <name>', 'what the key is for (shown in the admin API and the audit log)'],
      ['--role admin|viewer', 'admin: every route; viewer: read-only routes and /metrics'],
      [
        '--create',
        'create the SQLite file if it does not exist (refused otherwise: a wrong QL_DATABASE_URL)',
      ],
    ],
  },
  'enroll-token': {
    usage:
      'enroll-token create --worker <id> | --pattern <glob> --count <n> [--may-replace] [--ttl <duration>] [--out <file>]; list [--after <id>] [--limit <n>]; revoke <id>',
    summary:
      'make, list or revoke the tokens a new worker machine joins with, in QL_DATABASE_URL (named on stderr); create prints the token once (ADR 0045)',
    options: [
      ['--worker <id>', 'create: a token that enrolls this one worker id'],
      ['--pattern <glob>', "create: worker ids like 'router-*' (one *: one or more characters)"],
      ['--count <n>', 'with --pattern: how many worker ids it enrolls, each once (1..1000)'],
      [
        '--may-replace',
        'with --pattern: it may also enroll an id that has a current certificate or a live session (refused by default)',
      ],
      ['--ttl <duration>', 'create: its lifetime, 90s, 30m, 1h (the default) … 7d'],
      [
        '--out <file>',
        'create: write the token to this file (0600, replaced whole) for QL_WORKER_ENROLL_TOKEN_FILE, not to stdout',
      ],
      ['--after <id>', 'list: continue after this token id (nextAfter); --limit 1..200, 50 by default'],
    ],
  },
  secret: {
    usage:
      'secret set <name> (the value on stdin); list [--after <name>] [--limit <n>]; delete <name>; rotate',
    summary:
      'store, list or delete secrets in QL_DATABASE_URL (named on stderr), encrypted with QL_SECRETS_KEY; rotate re-encrypts every value to the current key (ADR 0050). Values never appear in an answer',
    options: [
      [
        'set <name>',
        'create or replace; reads the value from stdin (one trailing line break dropped), never from argv',
      ],
      ['--after <name>', 'list: continue after this name (nextAfter); --limit 1..200, 50 by default'],
      ['rotate', 'every value under QL_SECRETS_PREVIOUS_KEYS re-encrypted under QL_SECRETS_KEY / _KEY_ID'],
    ],
  },
  bundle: {
    usage: 'bundle push <folder|file.tar.gz|file>; list [--after <digest>] [--limit <n>]; delete <digest>',
    summary:
      'push, list or delete script bundles in QL_DATABASE_URL (named on stderr); push packs a folder into a .tar.gz itself, checks it as the upload route does and prints its digest (ADR 0051)',
    options: [
      [
        'push <folder>',
        'every file and folder under it (links refused); a .tar.gz as is; any other file alone',
      ],
      ['delete <digest>', 'refused while a live task or an unfinished run pins it (exit 1)'],
    ],
  },
  openapi: {
    usage: 'openapi [--out <file>]',
    summary: 'print the OpenAPI document (admin API and worker ingress)',
    options: [['--out <file>', 'write it to the file instead (npm run openapi: docs/openapi.json)']],
  },
  'config-docs': { usage: 'config-docs', summary: "print the README's configuration table" },
  help: { usage: 'help [<command>]', summary: 'print this help, or the help of one command' },
};

function commandHelp(name: string): string {
  const c = COMMANDS[name]!;
  const options = (c.options ?? []).map(([flag, text]) => `\n      ${flag.padEnd(22)}${text}`).join('');
  return `  ${c.usage}\n      ${c.summary}${options}`;
}

/** The npm scripts that start something: not CLI commands, each answers `-- --help` itself. */
const SERVICES: readonly (readonly [string, string])[] = [
  ['npm start', 'the quickstart: the control plane, then one supervised local worker'],
  ['npm run start:control-plane', 'the control plane alone'],
  ['npm run start:worker', 'a headless worker alone (QL_PROFILE=worker; also: main.js journal …)'],
  ['npm run bench -- [<group> ...]', 'the benchmarks (bench/README.md)'],
];

const HELP = [
  'usage: npm run <command> -- [options]   (or: node dist/apps/control-plane/src/cli.js <command> [options])',
  '',
  ...Object.keys(COMMANDS).map(commandHelp),
  '',
  'Services (npm scripts; `npm start -- --help`, `npm run start:worker -- --help` … print their usage):',
  ...SERVICES.map(([script, text]) => `  ${script.padEnd(32)}${text}`),
  '',
  'Settings come from QL_* environment variables (npm run config-docs lists them).',
].join('\n');

const isHelpFlag = (arg: string | undefined) => arg === '--help' || arg === '-h';

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
        process.stdout.write(
          `${JSON.stringify(key, null, 2)}\nStore the token now: it is not shown again.\n`,
        );
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
      return withDatabase(command, config, false, async ({ ids }, db) => {
        const { BundlesService } =
          require('./bundles/bundles.service') as typeof import('./bundles/bundles.service');
        const { SqlBundleRepository } = require('@ql/persistence') as Persistence;
        const service = new BundlesService(new SqlBundleRepository(db, ids), config);
        return runBundleCommand(
          bundleCommand,
          service,
          (text) => process.stdout.write(text),
          (text) => process.stderr.write(text),
        );
      });
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
  fn: (db: CommandDatabase, sql: import('@ql/persistence').SqlDatabase) => Promise<number>,
): Promise<number> {
  const sqlitePath = /^sqlite:/.test(config.databaseUrl)
    ? config.databaseUrl.slice('sqlite:'.length).replace(/^\/\//, '')
    : undefined;
  sayDatabase(config, sqlitePath);
  if (sqlitePath && !existsSync(sqlitePath) && !create) {
    const what =
      command === 'api-key'
        ? 'a key'
        : command === 'secret'
          ? 'a secret'
          : command === 'bundle'
            ? 'a bundle'
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
    return await fn(
      {
        repos: persistence.createRepositories(db, ids, { secretCipher }),
        ids,
        clock: systemClock,
      },
      db,
    );
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
