import { get } from '../api';
import { href } from '../router';
import type { Page, Run, Task, Worker } from '../types';
import { ErrorNote, Loading, Section, useLoad } from '../ui';

const HOUR = 3600_000;
const OUTCOMES = ['succeeded', 'failed', 'timed_out', 'cancelled', 'lost'] as const;
const WORKER_STATUSES = ['online', 'draining', 'expired', 'offline', 'disabled'] as const;

/** The last hour's runs, newest first, at most 1,000 (five pages). */
async function lastHour(signal: AbortSignal): Promise<Run[]> {
  const runs: Run[] = [];
  let before: string | null | undefined = undefined;
  for (let page = 0; page < 5; page++) {
    const query: string = `/api/v1/runs?limit=200${before ? `&before=${before}` : ''}`;
    const answer: Page<Run> = await get<Page<Run>>(query, signal);
    runs.push(...answer.items);
    before = answer.nextBefore;
    const oldest = answer.items[answer.items.length - 1];
    if (!before || !oldest || Date.parse(oldest.createdAt) < Date.now() - HOUR) break;
  }
  return runs.filter((r) => Date.parse(r.createdAt) >= Date.now() - HOUR);
}

async function load(signal: AbortSignal) {
  const [workers, runs, tasks] = await Promise.all([
    get<Page<Worker>>('/api/v1/workers?limit=200', signal),
    lastHour(signal),
    get<Page<Task>>('/api/v1/tasks?limit=200', signal),
  ]);
  return { workers: workers.items, runs, tasks: tasks.items };
}

/** Runs ended per minute over the last hour, stacked by outcome: an SVG chart with a text table twin. */
function RunsChart({ runs }: { runs: Run[] }) {
  const now = Date.now();
  const minutes = Array.from(
    { length: 60 },
    () => Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<string, number>,
  );
  for (const r of runs) {
    if (!r.finishedAt || !(OUTCOMES as readonly string[]).includes(r.status)) continue;
    const index = 59 - Math.floor((now - Date.parse(r.finishedAt)) / 60_000);
    if (index >= 0 && index < 60) minutes[index]![r.status]!++;
  }
  const max = Math.max(1, ...minutes.map((m) => OUTCOMES.reduce((sum, o) => sum + m[o]!, 0)));
  const totals = Object.fromEntries(OUTCOMES.map((o) => [o, minutes.reduce((sum, m) => sum + m[o]!, 0)]));
  return (
    <figure class="chart">
      <svg viewBox="0 0 600 160" role="img" aria-labelledby="runs-chart-caption" preserveAspectRatio="none">
        {minutes.map((m, i) => {
          let y = 150;
          return OUTCOMES.map((o) => {
            const h = (m[o]! / max) * 140;
            y -= h;
            return h > 0 ? (
              <rect key={`${i}-${o}`} class={`bar-${o}`} x={i * 10 + 1} y={y} width={8} height={h} />
            ) : null;
          });
        })}
        <line x1="0" y1="150.5" x2="600" y2="150.5" class="axis" />
      </svg>
      <figcaption id="runs-chart-caption">
        Runs ended per minute, last hour (peak {max}/min):{' '}
        {OUTCOMES.map((o) => (
          <span key={o} class={`legend legend-${o}`}>
            {o.replace('_', ' ')} {totals[o]}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}

export function DashboardPage() {
  const { data, error } = useLoad(load, [], 10_000);
  if (!data) return error ? <ErrorNote error={error} /> : <Loading what="the dashboard" />;
  const waiting = data.runs.filter((r) => ['queued', 'dispatching', 'retry_wait'].includes(r.status)).length;
  const running = data.runs.filter((r) => r.status === 'running').length;
  const byStatus = Object.fromEntries(
    WORKER_STATUSES.map((s) => [s, data.workers.filter((w) => w.status === s).length]),
  );
  const names = new Map(data.tasks.map((t) => [t.id, t.name]));
  const perTask = new Map<string, { runs: number; failed: number; totalMs: number; ended: number }>();
  for (const r of data.runs) {
    const s = perTask.get(r.taskId) ?? { runs: 0, failed: 0, totalMs: 0, ended: 0 };
    s.runs++;
    if (['failed', 'timed_out', 'lost'].includes(r.status)) s.failed++;
    if (r.finishedAt) {
      s.ended++;
      s.totalMs += Date.parse(r.finishedAt) - Date.parse(r.createdAt);
    }
    perTask.set(r.taskId, s);
  }
  const tasks = [...perTask.entries()].map(([id, s]) => ({
    id,
    ...s,
    meanMs: s.ended ? s.totalMs / s.ended : 0,
  }));
  const slowest = [...tasks]
    .filter((t) => t.ended > 0)
    .sort((a, b) => b.meanMs - a.meanMs)
    .slice(0, 5);
  const failing = [...tasks]
    .filter((t) => t.failed > 0)
    .sort((a, b) => b.failed - a.failed)
    .slice(0, 5);
  const taskLink = (id: string) => <a href={href('tasks', id)}>{names.get(id) ?? id.slice(-12)}</a>;
  return (
    <Section title="At a glance">
      <ErrorNote error={error} />
      <div class="tiles">
        <div class="tile">
          <span class="tile-value">{waiting}</span> waiting to run
        </div>
        <div class="tile">
          <span class="tile-value">{running}</span> running
        </div>
        {WORKER_STATUSES.map((s) => (
          <a key={s} class={`tile tile-${s}`} href={href('workers')}>
            <span class="tile-value">{byStatus[s]}</span> {s}
          </a>
        ))}
      </div>
      <RunsChart runs={data.runs} />
      <div class="columns">
        <div>
          <h3>Slowest tasks (last hour, mean)</h3>
          {slowest.length === 0 ? (
            <p class="muted">No run ended in the last hour.</p>
          ) : (
            <ol>
              {slowest.map((t) => (
                <li key={t.id}>
                  {taskLink(t.id)}: {(t.meanMs / 1000).toFixed(1)} s over {t.ended} runs
                </li>
              ))}
            </ol>
          )}
        </div>
        <div>
          <h3>Most failing tasks (last hour)</h3>
          {failing.length === 0 ? (
            <p class="muted">No failures in the last hour.</p>
          ) : (
            <ol>
              {failing.map((t) => (
                <li key={t.id}>
                  {taskLink(t.id)}: {t.failed} of {t.runs} runs
                </li>
              ))}
            </ol>
          )}
        </div>
      </div>
    </Section>
  );
}
