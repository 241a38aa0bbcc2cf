import { chmodSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { DomainError, ENROLLMENT_LIMITS, ValidationError, parseTtl } from '@ql/domain';
import { readQueryInt } from '../admin/query-params';
import type { EnrollmentTokensService } from './enrollment-tokens.service';

/** What `npm run enroll-token -- …` asks for (ADR 0045 §1), read before the database is opened. */
export type EnrollTokenCommand =
  | {
      readonly action: 'create';
      readonly body: Record<string, unknown>;
      /** `--out <file>`: the token goes to this file (0600), not to stdout. */
      readonly out?: string;
    }
  | { readonly action: 'list'; readonly query: Record<string, string> }
  | { readonly action: 'revoke'; readonly id: string };

/** The command's arguments; a ValidationError (a usage error, exit 2) names what is wrong. */
export function parseEnrollTokenCommand(args: string[]): EnrollTokenCommand {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      worker: { type: 'string' },
      pattern: { type: 'string' },
      count: { type: 'string' },
      ttl: { type: 'string' },
      after: { type: 'string' },
      limit: { type: 'string' },
      out: { type: 'string' },
      'may-replace': { type: 'boolean' },
    },
  });
  const [action, ...rest] = positionals;
  const defined = (entries: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(entries).filter(([, value]) => value !== undefined));
  if (values.out !== undefined && (action !== 'create' || !values.out.trim()))
    throw new ValidationError('enroll-token', '--out <file> goes with create');
  if (action === 'create' && rest.length === 0) {
    const count = values.count;
    return {
      action,
      ...(values.out === undefined ? {} : { out: values.out }),
      body: defined({
        workerId: values.worker,
        pattern: values.pattern,
        count:
          count === undefined
            ? undefined
            : readQueryInt(count, 'count', 1, ENROLLMENT_LIMITS.patternMaxWorkers),
        ttlSeconds: values.ttl === undefined ? undefined : parseTtl(values.ttl),
        mayReplace: values['may-replace'],
      }),
    };
  }
  if (action === 'list' && rest.length === 0)
    return { action, query: defined({ after: values.after, limit: values.limit }) as Record<string, string> };
  if (action === 'revoke' && rest.length === 1) return { action, id: rest[0]! };
  throw new ValidationError('enroll-token', 'expects create, list or revoke <id>');
}

/** Runs it: the answer as JSON on stdout; an unknown token id exits 1. */
export async function runEnrollTokenCommand(
  command: EnrollTokenCommand,
  service: EnrollmentTokensService,
  write: (text: string) => void,
  warn: (text: string) => void,
): Promise<number> {
  const cli = { id: 'cli' };
  try {
    if (command.action === 'create' && command.out !== undefined) {
      const { token, ...rest } = await service.create(cli, command.body);
      writeTokenFile(command.out, token);
      write(`${JSON.stringify({ ...rest, tokenFile: command.out }, null, 2)}\n`);
      return 0;
    }
    const answer =
      command.action === 'create'
        ? await service.create(cli, command.body)
        : command.action === 'list'
          ? await service.list(command.query)
          : await service.revoke(cli, command.id);
    write(`${JSON.stringify(answer, null, 2)}\n`);
    if (command.action === 'create') warn('Store the token now: it is not shown again.\n');
    return 0;
  } catch (error) {
    if (!(error instanceof DomainError) || (error.kind !== 'validation' && error.kind !== 'not_found'))
      throw error;
    warn(`enroll-token: ${error.message}\n`);
    return error.kind === 'validation' ? 2 : 1;
  }
}

/**
 * `--out`: the token alone and a line break, as `QL_WORKER_ENROLL_TOKEN_FILE` reads it, in a 0600 file
 * of this user's, put in place by a rename (a worker reading it sees the old token or the new one).
 */
function writeTokenFile(file: string, token: string): void {
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  try {
    writeFileSync(temp, `${token}\n`, { mode: 0o600, flag: 'wx' });
    chmodSync(temp, 0o600); // exact, whatever the umask
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
}
