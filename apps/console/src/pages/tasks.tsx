import { useState } from 'preact/hooks';
import { actionKey, api, get } from '../api';
import { CronPreview } from '../cron-preview';
import { Diff } from '../diff';
import { when } from '../format';
import { go, href } from '../router';
import type { Page, Revision, Run, Task, TaskSpec } from '../types';
import { ErrorNote, Loading, Section, useLoad } from '../ui';
import { RunsTable } from './runs';

const RUNTIMES = ['shell', 'node', 'python'];

async function trigger(taskId: string) {
  const answer = await api<{ run: Run }>(
    'POST',
    `/api/v1/tasks/${taskId}/runs`,
    {},
    { 'idempotency-key': actionKey() },
  );
  go('runs', answer.run.id);
}

export function TasksPage({ admin }: { admin: boolean }) {
  const { data, error } = useLoad((signal) => get<Page<Task>>('/api/v1/tasks?limit=200', signal), []);
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
      <ErrorNote error={error} />
      {!data ? (
        <Loading what="tasks" />
      ) : data.items.length === 0 ? (
        <p class="muted">No task yet.</p>
      ) : (
        <div class="table-wrap" role="region" aria-label="Tasks" tabIndex={0}>
          <table>
            <caption class="visually-hidden">Tasks</caption>
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">Command</th>
                <th scope="col">Runtime</th>
                <th scope="col">Schedule</th>
                <th scope="col">Revision</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((t) => (
                <tr key={t.id}>
                  <th scope="row">
                    <a href={href('tasks', t.id)}>{t.name}</a>
                  </th>
                  <td>
                    <code>{t.spec.command}</code>
                  </td>
                  <td>{t.spec.runtime}</td>
                  <td>{t.spec.cron ? `${t.spec.cron} (${t.spec.timezone ?? 'UTC'})` : '—'}</td>
                  <td>{t.revision}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}

export function TaskPage({ taskId, admin }: { taskId: string; admin: boolean }) {
  const task = useLoad((signal) => get<Task>(`/api/v1/tasks/${taskId}`, signal), [taskId]);
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
            <dt>Runtime</dt>
            <dd>{t.spec.runtime}</dd>
            <dt>Timeout</dt>
            <dd>{t.spec.timeoutMs ? `${t.spec.timeoutMs / 1000} s` : '—'}</dd>
            <dt>Schedule</dt>
            <dd>{t.spec.cron ? `${t.spec.cron} (${t.spec.timezone ?? 'UTC'})` : 'none'}</dd>
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

function TaskForm({ task }: { task: Task | null }) {
  const spec = task?.spec;
  const [name, setName] = useState(spec?.name ?? '');
  const [command, setCommand] = useState(spec?.command ?? '');
  const [runtime, setRuntime] = useState(spec?.runtime ?? 'shell');
  const [timeout, setTimeoutSeconds] = useState(spec?.timeoutMs ? String(spec.timeoutMs / 1000) : '');
  const [cron, setCron] = useState(spec?.cron ?? '');
  const [timezone, setTimezone] = useState(spec?.timezone ?? 'UTC');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const body: TaskSpec = {
      ...(spec ?? {}),
      name: name.trim(),
      command,
      runtime,
      cron: cron.trim() || null,
      timezone: cron.trim() ? timezone.trim() || 'UTC' : null,
      ...(timeout.trim() ? { timeoutMs: Number(timeout) * 1000 } : {}),
    };
    setBusy(true);
    try {
      const saved = task
        ? await api<Task>('PUT', `/api/v1/tasks/${task.id}`, body)
        : await api<Task>('POST', '/api/v1/tasks', body);
      go('tasks', saved.id);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Section title={task ? `Edit ${task.name}` : 'New task'}>
      <form class="task-form" onSubmit={submit}>
        <label for="name">Name</label>
        <input
          id="name"
          name="name"
          required
          maxLength={100}
          value={name}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <label for="command">Command</label>
        <textarea
          id="command"
          name="command"
          required
          rows={3}
          value={command}
          onInput={(e) => setCommand((e.target as HTMLTextAreaElement).value)}
        />
        <label for="runtime">Runtime</label>
        <select
          id="runtime"
          name="runtime"
          value={runtime}
          onChange={(e) => setRuntime((e.target as HTMLSelectElement).value)}
        >
          {RUNTIMES.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
        <label for="timeoutSeconds">Timeout (seconds, empty for the default)</label>
        <input
          id="timeoutSeconds"
          name="timeoutSeconds"
          type="number"
          min={1}
          value={timeout}
          onInput={(e) => setTimeoutSeconds((e.target as HTMLInputElement).value)}
        />
        <label for="cron">Cron (empty: only when triggered)</label>
        <input
          id="cron"
          name="cron"
          value={cron}
          onInput={(e) => setCron((e.target as HTMLInputElement).value)}
          placeholder="0 7 * * *"
        />
        <label for="timezone">Time zone</label>
        <input
          id="timezone"
          name="timezone"
          value={timezone}
          onInput={(e) => setTimezone((e.target as HTMLInputElement).value)}
        />
        <CronPreview cron={cron} timezone={timezone} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            {task ? 'Save' : 'Create'}
          </button>
          <a class="button" href={task ? href('tasks', task.id) : href('tasks')}>
            Cancel
          </a>
        </div>
        <ErrorNote error={error} />
      </form>
    </Section>
  );
}
