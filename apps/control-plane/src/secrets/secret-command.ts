import { parseArgs } from 'node:util';
import { DomainError, ValidationError, parseSecretName } from '@ql/domain';
import type { SecretsService } from './secrets.service';

/** What `npm run secret -- …` asks for (ADR 0050), read before the database is opened. */
export type SecretCommand =
  | { readonly action: 'set'; readonly name: string }
  | { readonly action: 'list'; readonly query: Record<string, string> }
  | { readonly action: 'delete'; readonly name: string }
  | { readonly action: 'rotate' };

/**
 * The command's arguments; a ValidationError (a usage error, exit 2) names what is wrong. The value
 * is never an argument (argv is visible to every user of the machine and kept in shell history).
 */
export function parseSecretCommand(args: string[]): SecretCommand {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { after: { type: 'string' }, limit: { type: 'string' } },
  });
  const [action, ...rest] = positionals;
  if (action === 'set' && rest.length === 1) return { action, name: parseSecretName(rest[0]) };
  if (action === 'set')
    throw new ValidationError('secret', 'expects set <name>: the value comes on stdin, never as an argument');
  if (action === 'delete' && rest.length === 1) return { action, name: parseSecretName(rest[0]) };
  if (action === 'rotate' && rest.length === 0) return { action };
  if (action === 'list' && rest.length === 0) {
    const query = Object.fromEntries(
      Object.entries({ after: values.after, limit: values.limit }).filter(([, v]) => v !== undefined),
    ) as Record<string, string>;
    return { action, query };
  }
  throw new ValidationError('secret', 'expects set <name>, list, delete <name> or rotate');
}

/** The value as piped: one trailing line break (what `echo` adds) is not part of it. */
export function valueFromStdin(raw: Buffer): string {
  return raw.toString('utf8').replace(/\r?\n$/, '');
}

/**
 * Runs it: the answer (metadata only) as JSON on stdout; an unknown name exits 1, a refusal 1, and so
 * does a `set` or `rotate` to a key a running control plane lacks (`refusal`, asked before anything is read).
 */
export async function runSecretCommand(
  command: SecretCommand,
  service: SecretsService,
  readValue: () => Promise<string>,
  write: (text: string) => void,
  warn: (text: string) => void,
  refusal: (action: 'set' | 'rotate') => Promise<string | undefined> = async () => undefined,
): Promise<number> {
  const cli = { id: 'cli' };
  const refused =
    command.action === 'set' || command.action === 'rotate' ? await refusal(command.action) : undefined;
  if (refused) {
    warn(`secret: ${refused}\n`);
    return 1;
  }
  try {
    const answer =
      command.action === 'set'
        ? await service.put(cli, command.name, await readValue(), 'upsert')
        : command.action === 'list'
          ? await service.list(command.query)
          : command.action === 'delete'
            ? await service.delete(cli, command.name)
            : await service.rotate(cli);
    write(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (
      !(error instanceof DomainError) ||
      (error.kind === 'unavailable' && !(error as { reason?: string }).reason?.startsWith('secret'))
    )
      throw error;
    warn(`secret: ${error.message}\n`);
    return error.kind === 'validation' ? 2 : 1;
  }
}
