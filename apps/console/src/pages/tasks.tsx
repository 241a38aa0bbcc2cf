import { useState } from 'preact/hooks';
import { actionKey, api, get } from '../api';
import { CronPreview } from '../cron-preview';
import { Diff } from '../diff';
import { when } from '../format';
import { go, href } from '../router';
import type { Page, Revision, Run, Task, TaskListItem, TaskSpec } from '../types';
import { ConfirmButton, ErrorNote, Loading, Section, Status, useLoad } from '../ui';
import { RunsTable } from './runs';
import { TaskForm, pairsOf } from './task-form';

async function trigger(taskId: string) {
  const answer = await api<{ run: Run }>(
    'POST',
    `/api/v1/tasks/${taskId}/runs`,
    {},
    { 'idempotency-key': actionKey() },
  );
  go('runs', answer.run.id);
}

/** One page of the list as the API answers it (pinned first; search and filters server-side). */
function tasksQuery(q: string, enabled: string, lastStatus: string, after: string | null): string {
  const params = new URLSearchParams({ limit: '100' });
  if (q.trim()) params.set('q', q.trim());
  if (enabled) params.set('enabled', enabled);
  if (lastStatus) params.set('lastStatus', lastStatus);
  if (after) params.set('after', after);
  return `/api/v1/tasks?${params.toString()}`;
}

const LAST_STATUSES = [
  '',
  'queued',
  'running',
  'succeeded',
  'failed',
  'timed_out',
  'cancelled',
  'lost',
] as const;

export function TasksPage({ admin }: { admin: boolean }) {
  const [q, setQ] = useState('');
  const [enabled, setEnabled] = useState('');
  const [lastStatus, setLastStatus] = useState('');
  // The cursors of the pages shown before this one: "Previous" pops one.
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const after = cursors[cursors.length - 1] ?? null;
  const [error, setError] = useState<string | null>(null);
  const {
    data,
    error: loadError,
    reload,
  } = useLoad(
    (signal) =>
      get<Page<TaskListItem> & { nextAfter: string | null }>(
        tasksQuery(q, enabled, lastStatus, after),
        signal,
      ),
    [q, enabled, lastStatus, after],
  );
  const filter = (set: (v: string) => void) => (value: string) => {
    set(value);
    setCursors([null]);
  };
  const change = async (t: TaskListItem, state: { enabled?: boolean; pinned?: boolean }) => {
    try {
      await api('PATCH', `/api/v1/tasks/${t.id}`, state);
      setError(null);
      reload();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  return (
    <Section
      title="Tasks"
      actions={
        admin ? (
          <a class="button primary" href={href('tasks', 'new')}>
            New task
          </a>
        ) : null
      }
    >
      <div class="filters" role="search">
        <label>
          Search (name or command){' '}
          <input
            type="search"
            value={q}
            onInput={(e) => filter(setQ)((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          State{' '}
          <select value={enabled} onChange={(e) => filter(setEnabled)((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            <option value="true">enabled</option>
            <option value="false">disabled</option>
          </select>
        </label>
        <label>
          Last run{' '}
          <select
            value={lastStatus}
            onChange={(e) => filter(setLastStatus)((e.target as HTMLSelectElement).value)}
          >
            {LAST_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s ? s.replace(/_/g, ' ') : 'any'}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorNote error={error ?? loadError} />
      {!data ? (
        <Loading what="tasks" />
      ) : data.items.length === 0 ? (
        <p class="muted">{q || enabled || lastStatus ? 'No task matches.' : 'No task yet.'}</p>
      ) : (
        <div class="table-wrap" role="region" aria-label="Tasks" tabIndex={0}>
          <table>
            <caption class="visually-hidden">Tasks</caption>
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">Command</th>
                <th scope="col">Schedule</th>
                <th scope="col">Next</th>
                <th scope="col">Last run</th>
                {admin ? <th scope="col">Actions</th> : null}
              </tr>
            </thead>
            <tbody>
              {data.items.map((t) => (
                <tr key={t.id}>
                  <th scope="row">
                    {t.pinned ? <span title="pinned">📌 </span> : null}
                    <a href={href('tasks', t.id)}>{t.name}</a>
                    {t.enabled ? null : <span class="muted"> (disabled)</span>}
                  </th>
                  <td>
                    <code>{t.spec.command}</code>
                  </td>
                  <td>{t.spec.cron ? `${t.spec.cron} (${t.spec.timezone ?? 'UTC'})` : '—'}</td>
                  <td>{t.nextFireAt ? when(t.nextFireAt) : t.spec.cron && !t.enabled ? 'skipped' : '—'}</td>
                  <td>
                    {t.lastRun ? (
                      <a href={href('runs', t.lastRun.id)}>
                        <Status value={t.lastRun.status} />
                      </a>
                    ) : (
                      '—'
                    )}
                  </td>
                  {admin ? (
                    <td>
                      <div class="actions">
                        <button
                          type="button"
                          aria-label={`${t.enabled ? 'Disable' : 'Enable'} ${t.name}`}
                          onClick={() => change(t, { enabled: !t.enabled })}
                        >
                          {t.enabled ? 'Disable' : 'Enable'}
                        </button>
                        <button
                          type="button"
                          aria-label={`${t.pinned ? 'Unpin' : 'Pin'} ${t.name}`}
                          onClick={() => change(t, { pinned: !t.pinned })}
                        >
                          {t.pinned ? 'Unpin' : 'Pin'}
                        </button>
                      </div>
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="pager">
        <button type="button" disabled={cursors.length < 2} onClick={() => setCursors(cursors.slice(0, -1))}>
          Previous
        </button>
        <button
          type="button"
          disabled={!data?.nextAfter}
          onClick={() => data?.nextAfter && setCursors([...cursors, data.nextAfter])}
        >
          Next
        </button>
      </div>
    </Section>
  );
}

export function TaskPage({ taskId, admin }: { taskId: string; admin: boolean }) {
  const task = useLoad((signal) => get<TaskListItem>(`/api/v1/tasks/${taskId}`, signal), [taskId]);
  const revisions = useLoad(
    (signal) => get<Page<Revision>>(`/api/v1/tasks/${taskId}/revisions?limit=20`, signal),
    [taskId],
  );
  const runs = useLoad(
    (signal) => get<Page<Run>>(`/api/v1/runs?taskId=${taskId}&limit=20`, signal),
    [taskId],
    5000,
  );
  const [error, setError] = useState<string | null>(null);
  const t = task.data;
  return (
    <Section
      title={t ? `Task ${t.name}` : 'Task'}
      actions={
        admin && t ? (
          <div class="actions">
            <button
              type="button"
              class="primary"
              onClick={() => trigger(taskId).catch((e: Error) => setError(e.message))}
            >
              Run now
            </button>
            <a class="button" href={href('tasks', taskId, 'edit')}>
              Edit
            </a>
            <button
              type="button"
              onClick={() =>
                api('PATCH', `/api/v1/tasks/${taskId}`, { enabled: !t.enabled }).then(
                  task.reload,
                  (e: Error) => setError(e.message),
                )
              }
            >
              {t.enabled ? 'Disable' : 'Enable'}
            </button>
            <ConfirmButton
              label="Delete"
              danger
              question={`Delete ${t.name}? Its runs stay, with the revision they ran.`}
              onConfirm={() => api('DELETE', `/api/v1/tasks/${taskId}`).then(() => go('tasks'))}
            />
          </div>
        ) : null
      }
    >
      <ErrorNote error={error ?? task.error} />
      {!t ? (
        <Loading what="the task" />
      ) : (
        <>
          <dl class="facts">
            <dt>Command</dt>
            <dd>
              <code>{t.spec.command}</code>
            </dd>
            <dt>State</dt>
            <dd>
              {t.enabled ? 'enabled' : 'disabled (cron skips it; its schedule is kept)'}
              {t.pinned ? ', pinned' : ''}
            </dd>
            <dt>Runtime</dt>
            <dd>{t.spec.runtime}</dd>
            <dt>Timeout</dt>
            <dd>{t.spec.timeoutMs ? `${t.spec.timeoutMs / 1000} s` : '—'}</dd>
            <dt>Schedule</dt>
            <dd>{t.spec.cron ? `${t.spec.cron} (${t.spec.timezone ?? 'UTC'})` : 'none'}</dd>
            <dt>Retries</dt>
            <dd>
              {t.spec.retry
                ? `${t.spec.retry.maxAttempts} attempts in all, the first retry after ${t.spec.retry.initialBackoffMs / 1000} s`
                : 'none'}
            </dd>
            <dt>Placement</dt>
            <dd>{placementText(t.spec.placement)}</dd>
            <dt>Bundle</dt>
            <dd>
              {t.spec.bundle ? (
                <>
                  <code>{t.spec.bundle.digest.slice(0, 12)}</code>, folder{' '}
                  <code>{t.spec.bundle.workdir}</code>
                </>
              ) : (
                'none'
              )}
            </dd>
            <dt>Secret env</dt>
            <dd>
              {pairsOf(t.spec.secretEnv)
                .map(([env, secret]) => `${env} ← ${secret}`)
                .join(', ') || 'none'}
            </dd>
            <dt>Revision</dt>
            <dd>
              {t.revision}, {when(t.updatedAt)}
            </dd>
          </dl>
          {t.spec.cron ? <CronPreview cron={t.spec.cron} timezone={t.spec.timezone ?? 'UTC'} /> : null}
          <h3>Recent runs</h3>
          {runs.data ? <RunsTable runs={runs.data.items} /> : <Loading what="runs" />}
          <h3>Revisions</h3>
          {revisions.data ? <Revisions items={revisions.data.items} /> : <Loading what="revisions" />}
        </>
      )}
    </Section>
  );
}

function placementText(placement: TaskSpec['placement']): string {
  const required = pairsOf(placement?.required?.labels).map(([k, v]) => `${k}=${v}`);
  const preferred = (placement?.preferred ?? []).map((p) => `${p.key}=${p.value} (weight ${p.weight})`);
  const parts = [
    required.length ? `requires ${required.join(', ')}` : '',
    preferred.length ? `prefers ${preferred.join(', ')}` : '',
  ].filter(Boolean);
  return parts.join('; ') || 'any worker with its runtime';
}

function Revisions({ items }: { items: Revision[] }) {
  return (
    <ol class="revisions" reversed>
      {items.map((r, n) => {
        const older = items[n + 1];
        return (
          <li key={r.revision}>
            <details>
              <summary>
                Revision {r.revision} — {when(r.createdAt)}
              </summary>
              {older ? (
                <Diff before={JSON.stringify(older.spec, null, 2)} after={JSON.stringify(r.spec, null, 2)} />
              ) : (
                <pre class="json" tabIndex={0}>
                  {JSON.stringify(r.spec, null, 2)}
                </pre>
              )}
            </details>
          </li>
        );
      })}
    </ol>
  );
}

/** Create (no taskId) or edit a task; only the fields this form knows are changed on edit. */
export function TaskEditPage({ admin, taskId }: { admin: boolean; taskId?: string }) {
  const existing = useLoad(
    (signal) => (taskId ? get<Task>(`/api/v1/tasks/${taskId}`, signal) : Promise.resolve(null)),
    [taskId],
  );
  if (!admin) return <p class="muted">Changing tasks needs an admin key.</p>;
  if (taskId && !existing.data) return <Loading what="the task" />;
  return <TaskForm task={existing.data ?? null} />;
}
