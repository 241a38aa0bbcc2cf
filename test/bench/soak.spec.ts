import { pragmasLine, soakResultName, soakSlopes } from '../../bench/soak-main';
import { SoakSample, leastSquaresSlope, soakConfig } from '../../bench/soak';

describe('soak bench: its settings and the slope it reports', () => {
  it('fits the least-squares slope of a line exactly, and of noise around a line closely', () => {
    const line = Array.from({ length: 10 }, (_, i) => ({ x: i, y: 3 + 0.25 * i }));
    expect(leastSquaresSlope(line)).toBeCloseTo(0.25, 12);
    const zigzag = line.map((p, i) => ({ x: p.x, y: p.y + (i % 2 ? 2 : -2) }));
    expect(leastSquaresSlope(zigzag)).toBeCloseTo(0.25 + 4 * (5 / 165), 12);
    expect(leastSquaresSlope([{ x: 1, y: 1 }])).toBeNaN();
    expect(
      leastSquaresSlope([
        { x: 1, y: 1 },
        { x: 1, y: 2 },
      ]),
    ).toBeNaN();
  });

  const sample = (t: number, rssMiB: number): SoakSample => ({
    t,
    rssMiB,
    anonMiB: rssMiB / 2,
    heapUsedMiB: 40,
    heapTotalMiB: 50,
    externalMiB: 4,
    finished: t,
    backlog: 0,
    triggered: t,
    workersRssMiB: 120,
    loadAvg1: 1,
  });

  it('leaves the samples before the settle out of the slope, in MiB per minute', () => {
    // Growth of 10 MiB a minute for 5 minutes (warm-up), then flat at 150 MiB.
    const samples = Array.from({ length: 41 }, (_, k) => {
      const t = k * 15;
      return sample(t, t < 300 ? 100 + (10 * t) / 60 : 150);
    });
    const slopes = soakSlopes(samples, 5);
    expect(slopes.samples).toBe(21);
    expect(slopes.rss).toBeCloseTo(0, 12);
    expect(slopes.anon).toBeCloseTo(0, 12);
    // With the warm-up in, the same samples read as growth.
    expect(soakSlopes(samples, 0).rss).toBeGreaterThan(1);
  });

  it('reads its settings: defaults, the rate when given, and a refused dialect', () => {
    const cfg = soakConfig({});
    expect(cfg).toMatchObject({
      dialect: 'postgres',
      minutes: 30,
      settleMinutes: 5,
      sampleSeconds: 15,
      level: { workers: 2, slots: 2 },
      rate: undefined,
      rateShare: 0.5,
    });
    expect(soakConfig({ QL_BENCH_SOAK_RATE: '12.5', QL_BENCH_SOAK_MINUTES: '4' })).toMatchObject({
      rate: 12.5,
      minutes: 4,
      settleMinutes: 2, // at most half the run
    });
    expect(() => soakConfig({ QL_BENCH_SOAK_DIALECT: 'mysql' })).toThrow(/QL_BENCH_SOAK_DIALECT/);
  });

  it('names its result files by dialect, so a SQLite run leaves the PostgreSQL result in place', () => {
    expect(soakResultName('postgres')).toBe('soak');
    expect(soakResultName('sqlite')).toBe('soak-sqlite');
  });

  it("states the SQLite pragmas in force on the plane's connection", () => {
    const line = pragmasLine({
      pageSize: 4096,
      cacheSize: -16000,
      cacheKiB: 16000,
      mmapSize: 0,
      walAutocheckpoint: 1000,
      journalMode: 'wal',
    });
    expect(line).toContain('cache_size -16000 (16000 KiB)');
    expect(line).toContain('mmap_size 0');
    expect(line).toContain('wal_autocheckpoint 1000 pages');
  });
});
