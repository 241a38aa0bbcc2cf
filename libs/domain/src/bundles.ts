import { ValidationError } from './errors';
import { readObject, readString } from './strict';

/** A bundle is named by the SHA-256 of its stored `.tar.gz` bytes, lower-case hex (ADR 0051). */
export const BUNDLE_DIGEST_PATTERN = /^[0-9a-f]{64}$/;
/** A working folder inside a bundle: relative segments, no `.`/`..`, no backslash; `.` is its root. */
export const BUNDLE_WORKDIR_PATTERN =
  /^(\.|[A-Za-z0-9_@+-][A-Za-z0-9_.@+ -]*(\/[A-Za-z0-9_@+-][A-Za-z0-9_.@+ -]*)*)$/;
export const BUNDLE_WORKDIR_MAX_LENGTH = 512;

/** What a task revision pins (issue 19 item 2): the bundle and the folder inside it the command runs in. */
export interface TaskBundle {
  readonly digest: string;
  readonly workdir: string;
}

/** Strictly reads `bundle` of a task body; a workdir absent means the bundle's root (`.`). */
export function parseTaskBundle(value: unknown): TaskBundle {
  const raw = readObject(value, 'bundle', ['digest', 'workdir']);
  const digest = readString(raw.digest, 'bundle.digest', { max: 64, pattern: BUNDLE_DIGEST_PATTERN });
  const workdir =
    raw.workdir === undefined
      ? '.'
      : readString(raw.workdir, 'bundle.workdir', {
          max: BUNDLE_WORKDIR_MAX_LENGTH,
          pattern: BUNDLE_WORKDIR_PATTERN,
        });
  if (workdir !== '.' && workdir.split('/').some((s) => s === '..' || s === '.'))
    throw new ValidationError('bundle.workdir', 'invalid_format');
  return { digest, workdir };
}
