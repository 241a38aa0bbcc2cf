import { nextFireTime, parseCron } from '../../../libs/domain/src/cron';

/** The next five fires of a cron expression in its zone, by the same code the control plane runs. */
export function CronPreview({ cron, timezone }: { cron: string; timezone: string }) {
  if (!cron.trim()) return <p class="muted">No schedule: runs start when triggered.</p>;
  let fires: number[];
  try {
    const schedule = parseCron(cron.trim(), 'cron', timezone.trim() || 'UTC');
    fires = [];
    let at = Date.now();
    for (let i = 0; i < 5; i++) {
      const next = nextFireTime(schedule, at);
      if (next === null) break;
      fires.push(next);
      at = next;
    }
  } catch (e) {
    return (
      <p class="error" role="status">
        {e instanceof Error ? e.message : String(e)}
      </p>
    );
  }
  const zone = timezone.trim() || 'UTC';
  const format = new Intl.DateTimeFormat(undefined, {
    timeZone: zone,
    dateStyle: 'medium',
    timeStyle: 'medium',
  });
  return (
    <div class="cron-preview" role="status">
      <p>Next fires ({zone}):</p>
      <ol>
        {fires.map((t) => (
          <li key={t}>{format.format(new Date(t))}</li>
        ))}
      </ol>
    </div>
  );
}
