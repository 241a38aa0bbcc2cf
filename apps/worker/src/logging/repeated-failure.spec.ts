import { RepeatedFailureLog } from './repeated-failure';
import type { LogFields, WorkerLog } from './worker-log';

function collecting() {
  const lines: { level: string; msg: string; fields?: LogFields }[] = [];
  const sink = (level: string) => (msg: string, fields?: LogFields) => lines.push({ level, msg, fields });
  const log: WorkerLog = {
    debug: sink('debug'),
    info: sink('info'),
    warn: sink('warn'),
    error: sink('error'),
  };
  return { lines, log };
}

describe('RepeatedFailureLog (issue 16 item 11)', () => {
  it('an outage of 60 failures, one a second: the first, summaries 1, 2, 4 … s apart, then one recovery line', () => {
    let now = 0;
    const { lines, log } = collecting();
    const failures = new RepeatedFailureLog(log, 'pull', () => now);
    for (let i = 0; i < 60; i++, now += 1000) failures.failed({ code: 'control_plane_unavailable' });
    failures.succeeded();
    failures.succeeded(); // no outage: nothing more

    expect(lines.map((l) => l.msg)).toEqual([
      'pull failed',
      ...Array<string>(5).fill('pull still failing'), // at 1, 3, 7, 15, 31 s
      'pull recovered',
    ]);
    expect(lines[1]!.fields).toMatchObject({ failures: 2, failuresSinceLastLine: 1, failingForMs: 1000 });
    expect(lines[5]!.fields).toMatchObject({ failures: 32, failuresSinceLastLine: 16, failingForMs: 31000 });
    expect(
      lines.every((l) => l.msg === 'pull recovered' || l.fields?.code === 'control_plane_unavailable'),
    ).toBe(true);
    expect(lines[6]).toMatchObject({ level: 'info', fields: { failures: 60 } });

    failures.failed({ code: 'timeout' }); // a new outage starts over
    expect(lines[7]).toMatchObject({ level: 'warn', msg: 'pull failed', fields: { code: 'timeout' } });
  });
});
