import { BUNDLE_LIMITS, readBundle } from '@ql/contracts';
import { Readable } from 'node:stream';
import { BundleSample, benchBundle, bundleConfig, roundOrder, summarizeBundle } from '../../bench/bundle';

describe('bundle bench: its settings, its bundle and its summary', () => {
  it('reads its settings, refusing nonsense', () => {
    expect(bundleConfig({})).toEqual({
      rounds: 8,
      runsPerRound: 5,
      mib: 10,
      files: 500,
      dialects: ['sqlite', 'postgres'],
    });
    expect(bundleConfig({ QL_BENCH_DIALECTS: 'postgres', QL_BENCH_BUNDLE_FILES: '20' })).toMatchObject({
      files: 20,
      dialects: ['postgres'],
    });
    expect(() => bundleConfig({ QL_BENCH_DIALECTS: 'mysql' })).toThrow(/unknown dialect "mysql"/);
    expect(() => bundleConfig({ QL_BENCH_BUNDLE_ROUNDS: '0' })).toThrow(/QL_BENCH_BUNDLE_ROUNDS/);
  });

  it('packs the asked bytes in the asked files (random: the archive is as big), and run.js, as the worker reads them', async () => {
    const b = benchBundle(0.5, 30);
    expect(b.bytes).toBe(512 * 1024);
    expect(b.content.length).toBeGreaterThan(b.bytes);
    const summary = await readBundle(Readable.from([b.content]), async () => undefined, BUNDLE_LIMITS);
    expect(summary.files).toBe(31);
    expect(benchBundle(0.5, 30).digest).not.toBe(b.digest);
  });

  it('alternates cached and inline runs, the round choosing which goes first', () => {
    expect(roundOrder(1, 2)).toEqual(['cached', 'inline', 'cached', 'inline']);
    expect(roundOrder(2, 1)).toEqual(['inline', 'cached']);
  });

  it('reports medians, p90 and the ratios to inline (of medians, of pairs in a round) per dialect', () => {
    const s = (dialect: string, variant: BundleSample['variant'], ms: number, round = 1): BundleSample => ({
      dialect,
      round,
      variant,
      toRunningMs: ms,
      startingToRunningMs: ms / 2,
      cpuMs: { worker: ms / 10 },
    });
    const rows = summarizeBundle([
      ...[100, 110, 120].map((ms) => s('sqlite', 'inline', ms)),
      ...[115, 121, 132, 500].map((ms) => s('sqlite', 'cached', ms)),
      s('sqlite', 'first', 900),
      s('postgres', 'inline', 50),
    ]);
    expect(rows.map((r) => [r.dialect, r.variant, r.runs])).toEqual([
      ['sqlite', 'first', 1],
      ['sqlite', 'cached', 4],
      ['sqlite', 'inline', 3],
      ['postgres', 'inline', 1],
    ]);
    const cached = rows[1]!;
    expect(cached.medianMs).toBe(126.5);
    expect(cached.p90Ms).toBe(500);
    expect(cached.ratioToInline).toBeCloseTo(126.5 / 110, 12);
    expect(cached.cpuMs.worker).toBeCloseTo(12.65, 12);
    // Pairs: 115/100, 121/110, 132/120 (the 4th cached run has no inline beside it).
    expect(cached.pairedRatio).toBeCloseTo(121 / 110, 12);
    expect(cached.startingToRunningRatio).toBeCloseTo(126.5 / 110, 12);
    expect(rows[0]!.pairedRatio).toBe(9);
    // Pairs stay within their round.
    const two = summarizeBundle([
      s('sqlite', 'cached', 200, 1),
      s('sqlite', 'inline', 100, 2),
      s('sqlite', 'cached', 300, 2),
    ]);
    expect(two[0]!.pairedRatio).toBe(3);
  });
});
