import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DomainError, ENV_IMPORT_MAX_BYTES, ValidationError, parseEnvVarName } from '@ql/domain';
import type { EnvVarsService } from './env-vars.service';

/** What `npm run env -- …` asks for (ADR 0061), read before the database is opened. */
export interface EnvImportCommand {
  readonly action: 'import';
  readonly file: string;
  readonly apply: boolean;
  readonly plain: string[];
}

/** The command's arguments; a ValidationError (a usage error, exit 2) names what is wrong. */
export function parseEnvCommand(args: string[]): EnvImportCommand {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { yes: { type: 'boolean' }, plain: { type: 'string', multiple: true } },
  });
  const [action, ...rest] = positionals;
  if (action !== 'import' || rest.length !== 1)
    throw new ValidationError('env', 'expects import <file> [--yes] [--plain NAME ...]');
  return {
    action,
    file: rest[0]!,
    apply: values.yes === true,
    plain: (values.plain ?? []).map((n) => parseEnvVarName(n, '--plain')),
  };
}

/**
 * Runs it: the report as JSON on stdout (names, never a value); without `--yes` nothing is written.
 * A file that cannot be read or is too large exits 2; a refusal (a limit, no key) exits 1.
 */
export async function runEnvCommand(
  command: EnvImportCommand,
  service: EnvVarsService,
  write: (text: string) => void,
  warn: (text: string) => void,
  refusal: () => Promise<string | undefined> = async () => undefined,
): Promise<number> {
  let content: string;
  try {
    content = readFileSync(command.file, 'utf8');
  } catch (error) {
    warn(`env: cannot read ${command.file}: ${(error as Error).message}\n`);
    return 2;
  }
  if (content.length > ENV_IMPORT_MAX_BYTES) {
    warn(`env: ${command.file} is over ${ENV_IMPORT_MAX_BYTES} characters\n`);
    return 2;
  }
  const refused = command.apply ? await refusal() : undefined;
  if (refused) {
    warn(`env: ${refused}\n`);
    return 1;
  }
  try {
    const report = await service.import(
      { id: 'cli' },
      { content, apply: command.apply, plain: command.plain },
    );
    write(`${JSON.stringify(report, null, 2)}\n`);
    if (!command.apply) warn('env: nothing was written; run again with --yes to apply\n');
    return 0;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    warn(`env: ${error.message}\n`);
    return error.kind === 'validation' ? 2 : 1;
  }
}
