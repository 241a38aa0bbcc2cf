import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/** `<group>-<time>.json` of one group: the time as `resultStamp` writes it, nothing else after the name. */
function resultFilePattern(name: string): RegExp {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped}-\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}-\\d{3}Z\\.json$`);
}

/** The run's start time as it names the result files: an ISO time with `:` and `.` as `-`. */
export function resultStamp(started: Date): string {
  return started.toISOString().replace(/[:.]/g, '-');
}

/**
 * Writes `<name>-<time>.json` (everything measured) and removes the group's older ones: the folder
 * keeps the latest result of each group, git history the rest. Another group whose name starts
 * with this one (`heartbeat-mtls` beside `heartbeat`) is left alone: only a time may follow the name.
 * Answers the path written.
 */
export function writeResultJson(resultsDir: string, name: string, started: Date, json: unknown): string {
  mkdirSync(resultsDir, { recursive: true });
  const file = `${name}-${resultStamp(started)}.json`;
  const jsonPath = join(resultsDir, file);
  writeFileSync(jsonPath, JSON.stringify(json, null, 2) + '\n');
  const pattern = resultFilePattern(name);
  for (const other of readdirSync(resultsDir)) {
    if (other !== file && pattern.test(other)) rmSync(join(resultsDir, other), { force: true });
  }
  return jsonPath;
}

/** The last line of a `latest-<name>.md`: where its raw samples are, relative to the repository. */
export function rawSamplesLine(resultsDir: string, jsonPath: string): string {
  return `Raw samples: \`${relative(resolve(resultsDir, '../..'), jsonPath)}\`.`;
}

/**
 * Writes `<name>-<time>.json` (everything measured; older ones of the group removed, see
 * `writeResultJson`) and `latest-<name>.md` (the tables, with a line pointing at the JSON) into the
 * results folder, and says where.
 */
export function writeResults(
  resultsDir: string,
  name: string,
  started: Date,
  json: unknown,
  markdown: readonly string[],
): void {
  const jsonPath = writeResultJson(resultsDir, name, started, json);
  const mdPath = join(resultsDir, `latest-${name}.md`);
  writeFileSync(mdPath, [...markdown, rawSamplesLine(resultsDir, jsonPath), ''].join('\n'));
  console.log(`results: ${relative(process.cwd(), jsonPath)}, ${relative(process.cwd(), mdPath)}`);
}
