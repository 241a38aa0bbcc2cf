import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The timestamps (ms) a marker task appended to `<folder>/<attemptId>.beats`, one per line; none
 * before it wrote one. A killed attempt stops beating: its last beat is when it ended.
 */
export function markerBeats(folder: string, attemptId: string): number[] {
  try {
    return readFileSync(join(folder, `${attemptId}.beats`), 'utf8')
      .trim()
      .split('\n')
      .map(Number);
  } catch {
    return [];
  }
}
