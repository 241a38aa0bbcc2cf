/** The CLI's commands, their usage and help texts (cli.ts runs them). */
export interface Command {
  readonly usage: string;
  readonly summary: string;
  readonly options?: readonly (readonly [string, string])[];
}

/** Each command loads its modules on use: `--help` must not pay for Nest, TypeORM and pg. */
export const COMMANDS: Record<string, Command> = {
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
  env: {
    usage: 'env import <file> [--yes] [--plain <NAME> ...]',
    summary:
      'import global env vars into QL_DATABASE_URL (named on stderr) from an `export A="…"` file or QingLong\'s env JSON export; prints the report, and writes only with --yes; a second import changes nothing (ADR 0061)',
    options: [
      ['--yes', 'make the changes (without it: the report only, nothing written)'],
      [
        '--plain <NAME>',
        'import this variable as plain (repeatable); every other one is a secret (QL_SECRETS_KEY)',
      ],
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
  backup: {
    usage: 'backup --out <file>',
    summary:
      "a consistent copy of the SQLite database in QL_DATABASE_URL while the control plane runs (SQLite's online backup, integrity-checked; PostgreSQL: pg_dump, docs/operations.md)",
    options: [
      [
        '--out <file>',
        'the new file (refused if it exists); restore: docs/operations.md, "Backup and restore"',
      ],
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

export function commandHelp(name: string): string {
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

export const HELP = [
  'usage: npm run <command> -- [options]   (or: node dist/apps/control-plane/src/cli.js <command> [options])',
  '',
  ...Object.keys(COMMANDS).map(commandHelp),
  '',
  'Services (npm scripts; `npm start -- --help`, `npm run start:worker -- --help` … print their usage):',
  ...SERVICES.map(([script, text]) => `  ${script.padEnd(32)}${text}`),
  '',
  'Settings come from QL_* environment variables (npm run config-docs lists them).',
].join('\n');

export const isHelpFlag = (arg: string | undefined) => arg === '--help' || arg === '-h';
