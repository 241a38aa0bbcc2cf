import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * Writes `<name>-<time>.json` (everything measured) and `latest-<name>.md` (the tables, with a line
 * pointing at the JSON) into the results folder, and says where.
 */
export function writeResults(
  resultsDir: string,
  name: string,
  started: Date,
  json: unknown,
  markdown: readonly string[],
): void {
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  mkdirSync(resultsDir, { recursive: true });
  const jsonPath = join(resultsDir, `${name}-${stamp}.json`);
  writeFileSync(jsonPath, JSON.stringify(json, null, 2) + '\n');
  const mdPath = join(resultsDir, `latest-${name}.md`);
  const rawLine = `Raw samples: \`${relative(resolve(resultsDir, '../..'), jsonPath)}\`.`;
  writeFileSync(mdPath, [...markdown, rawLine, ''].join('\n'));
  console.log(`results: ${relative(process.cwd(), jsonPath)}, ${relative(process.cwd(), mdPath)}`);
}
