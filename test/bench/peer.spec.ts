import { LATENCY_STEPS, paired, parseLevels, runLatency } from '../../bench/peer';

describe('peer bench: levels, steps of a run at idle, paired ratios', () => {
  it('reads W×S levels written with x or ×', () => {
    expect(parseLevels('1x1, 4×1,4x4')).toEqual([
      { workers: 1, slots: 1 },
      { workers: 4, slots: 1 },
      { workers: 4, slots: 4 },
    ]);
  });

  it.each(['4', '0x1', '1x0', '65x1', '2x2x2', '', 'ax1'])(
    'refuses the level "%s", naming the variable',
    (bad) => {
      expect(() => parseLevels(bad)).toThrow(/^QL_BENCH_PEER_LEVELS: ".*" is not W×S/);
    },
  );

  const at = (ms: number) => new Date(Date.UTC(2026, 11, 5, 10, 0, 0, ms)).toISOString();
  const events = [
    { type: 'run.created', at: at(3) },
    { type: 'run.dispatching', at: at(10) },
    { type: 'attempt.claimed', at: at(10) },
    { type: 'attempt.starting', at: at(14) },
    { type: 'attempt.running', at: at(20) },
    { type: 'run.running', at: at(21) },
    { type: 'attempt.finished', at: at(29) },
    { type: 'run.finished', at: at(29) },
  ];

  it("splits a run's latency at the events of each step, from the trigger sent", () => {
    const latency = runLatency(Date.parse(at(0)), events);
    expect(latency.totalMs).toBe(29);
    expect(LATENCY_STEPS.map((s) => latency.steps[s])).toEqual([3, 7, 0, 4, 6, 9]);
  });

  it('a run whose events miss a step, or repeat one (a retried attempt), is not a sample at idle', () => {
    expect(() =>
      runLatency(
        0,
        events.filter((e) => e.type !== 'attempt.starting'),
      ),
    ).toThrow(/attempt\.starting: 0/);
    expect(() => runLatency(0, [...events, { type: 'attempt.claimed', at: at(40) }])).toThrow(
      /attempt\.claimed: 2/,
    );
  });

  it('the ratio is paired within a round (median of the ratios), rounds missing a side left out of it', () => {
    const r = paired([{ ours: 10, peer: 20 }, { ours: 30, peer: 30 }, { ours: 5, peer: 100 }, { peer: 1 }]);
    expect(r).toEqual({ ours: 10, peer: 25, ratio: 0.5 });
  });
});
