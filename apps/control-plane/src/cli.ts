import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { createRepositories, openDatabase, parseDatabaseUrl, runMigrations } from '@ql/persistence';
import { AdminService } from './admin/admin.service';
import { configTable, loadConfig } from './config/config';
import { ensureDevPki } from './pki';

const USAGE = `usage: cli <command>
  migrate                                  apply database migrations (QL_DATABASE_URL)
  pki [--worker <id> ...] [--server-name <dns> ...]
                                           create the development PKI (CA, server, worker certificates);
                                           the server certificate carries localhost + each --server-name
  api-key --name <name> --role admin|viewer  create an API key and print it once
  openapi                                  print the OpenAPI document (admin API and worker ingress)
  config-docs                              print the configuration table`;

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const config = loadConfig();
  switch (command) {
    case 'migrate': {
      const target = parseDatabaseUrl(config.databaseUrl);
      await runMigrations(target);
      process.stdout.write(`migrations applied (${target.dialect})\n`);
      return;
    }
    case 'pki': {
      const { values } = parseArgs({
        args: rest,
        options: {
          worker: { type: 'string', multiple: true },
          'server-name': { type: 'string', multiple: true },
        },
      });
      const paths = await ensureDevPki(config.devPkiDir, {
        trustDomain: config.trustDomain,
        workers: values.worker?.length ? values.worker : ['worker-1'],
        serverDnsNames: [...new Set(['localhost', ...(values['server-name'] ?? [])])],
      });
      process.stdout.write(`${JSON.stringify(paths, null, 2)}\n`);
      return;
    }
    case 'api-key': {
      const { values } = parseArgs({
        args: rest,
        options: { name: { type: 'string' }, role: { type: 'string' } },
      });
      const target = parseDatabaseUrl(config.databaseUrl);
      const db = await openDatabase(target, systemClock, target.dialect === 'sqlite');
      try {
        const ids = createIdGenerator();
        const repos = createRepositories(db, ids);
        const service = new AdminService(repos.sessions, repos.apiKeys, repos.audit, ids, repos.revocations);
        const key = await service.createApiKey({ id: 'cli' }, { name: values.name, role: values.role });
        process.stdout.write(
          `${JSON.stringify(key, null, 2)}\nStore the token now: it is not shown again.\n`,
        );
      } finally {
        await db.close();
      }
      return;
    }
    case 'openapi': {
      // Loaded here: it builds both applications' module graphs, which no other command needs.
      const { offlineOpenApiDocument } = await import('./api-docs.js');
      process.stdout.write(`${JSON.stringify(await offlineOpenApiDocument(config), null, 2)}\n`);
      return;
    }
    case 'config-docs':
      process.stdout.write(`${configTable()}\n`);
      return;
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
