import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeResultJson, writeResults } from '../../bench/lib/results';

describe('bench results: the folder keeps the latest result of each group', () => {
  let dir: string;
  const others = [
    'heartbeat-mtls-2026-12-02T04-49-09-801Z.json', // another group whose name starts with this one
    'claim-2026-12-01T19-35-49-552Z.json',
    'latest-heartbeat.md',
    'curve.svg',
    'heartbeat-notes.json', // not a result file: no time after the name
  ];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ql-bench-results-'));
    for (const f of [
      'heartbeat-2026-12-01T08-11-08-331Z.json',
      'heartbeat-2026-12-02T03-48-51-818Z.json',
      ...others,
    ])
      writeFileSync(join(dir, f), '{}\n');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("writing a group's JSON removes its older ones and nothing else", () => {
    const path = writeResultJson(dir, 'heartbeat', new Date('2026-12-05T10:00:00.123Z'), { n: 1 });
    expect(path).toBe(join(dir, 'heartbeat-2026-12-05T10-00-00-123Z.json'));
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual({ n: 1 });
    expect(readdirSync(dir).sort()).toEqual(['heartbeat-2026-12-05T10-00-00-123Z.json', ...others].sort());
  });

  it('writeResults does the same beside latest-<group>.md, which points at the new JSON', () => {
    const log = jest.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      writeResults(dir, 'claim', new Date('2026-12-05T10:00:00.000Z'), {}, ['# Claim']);
    } finally {
      log.mockRestore();
    }
    const files = readdirSync(dir);
    expect(files.filter((f) => f.startsWith('claim-'))).toEqual(['claim-2026-12-05T10-00-00-000Z.json']);
    expect(files).toContain('heartbeat-2026-12-01T08-11-08-331Z.json');
    expect(readFileSync(join(dir, 'latest-claim.md'), 'utf8')).toContain(
      'claim-2026-12-05T10-00-00-000Z.json',
    );
  });
});
