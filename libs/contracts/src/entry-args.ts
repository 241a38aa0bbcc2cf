import { writeErr, writeOut } from './stdio';

export const isHelpFlag = (arg: string | undefined): boolean => arg === '--help' || arg === '-h';

/**
 * The arguments of an entry point that starts something (the quickstart, the control plane, the
 * worker, the bench), checked before anything starts (ADR 0034): `--help`/`-h` prints `usage` on
 * stdout and answers 0; an argument `accepts` refuses is named on stderr with the usage and answers 2.
 * `undefined`: go on.
 */
export function checkEntryArgs(
  args: readonly string[],
  usage: string,
  accepts: (arg: string) => boolean = () => false,
): 0 | 2 | undefined {
  if (args.some(isHelpFlag)) {
    writeOut(`${usage}\n`);
    return 0;
  }
  const refused = args.filter((arg) => !accepts(arg));
  if (refused.length === 0) return undefined;
  const what = refused[0]!.startsWith('-') ? 'unknown option' : 'unexpected argument';
  writeErr(`${what}: ${refused.join(' ')}\n\n${usage}\n`);
  return 2;
}
