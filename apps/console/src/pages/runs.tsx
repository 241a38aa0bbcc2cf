import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, get } from '../api';
import { RUN_STATUSES, isTerminalRun } from '../../../../libs/domain/src/run-statuses';
import { AnsiText } from '../ansi';
import { age, duration, when } from '../format';
import { href } from '../router';
import type { LogEntry, LogPage, Page, Run, RunDetail, Task, Worker } from '../types';
import { ConfirmButton, ErrorNote, Loading, Section, Status, useLoad } from '../ui';

const ENDED = new Set<string>(RUN_STATUSES.filter(isTerminalRun));

/** Task names by id (the first 200 tasks), for tables of runs that name their task. */
export function useTaskNames(): Map<string, string> | undefined {
  const { data } = useLoad((signal) => get<Page<Task>>('/api/v1/tasks?limit=200', signal), []);
  return useMemo(() => (data ? new Map(data.items.map((t) => [t.id, t.name])) : undefined), [data]);
}

export function RunsTable(props: { runs: Run[]; tasks?: Map<string, string>; label?: string }) {
  const { runs, tasks, label = 'Runs' } = props;
  if (runs.length === 0) return <p class="muted">No runs.</p>;
  return (
    <div class="table-wrap" role="region" aria-label={label} tabIndex={0}>
      <table>
        <caption class="visually-hidden">{label}</caption>
        <thead>
          <tr>
            <th scope="col">Run</th>
            {tasks ? <th scope="col">Task</th> : null}
            <th scope="col">Status</th>
            <th scope="col">Trigger</th>
            <th scope="col">Attempts</th>
            <th scope="col">Created</th>
            <th scope="col">Took</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((r) => (
            <tr key={r.id}>
              <th scope="row">
                <a href={href('runs', r.id)}>{r.id.slice(-12)}</a>
              </th>
              {tasks ? (
                <td>
                  <a href={href('tasks', r.taskId)}>
                    {r.taskName ?? tasks.get(r.taskId) ?? r.taskId.slice(-12)}
                  </a>
                </td>
              ) : null}
              <td>
                <Status value={r.status} />
              </td>
              <td>{r.trigger}</td>
              <td>{r.attemptCount}</td>
              <td title={when(r.createdAt)}>{age(r.createdAt)}</td>
              <td>{duration(r.createdAt, r.finishedAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function RunsPage() {
  const [status, setStatus] = useState('');
  const [taskId, setTaskId] = useState('');
  const [workerId, setWorkerId] = useState('');
  const workers = useLoad((signal) => get<Page<Worker>>('/api/v1/workers?limit=200', signal), []);
  const tasks = useTaskNames();
  const [since, setSince] = useState('');
  const [before, setBefore] = useState<string[]>([]);
  const cursor = before[before.length - 1];
  const query = new URLSearchParams({ limit: '50' });
  if (status) query.set('status', status);
  if (taskId.trim()) query.set('taskId', taskId.trim());
  if (workerId) query.set('workerId', workerId);
  if (cursor) query.set('before', cursor);
  const { data, error } = useLoad(
    (signal) => get<Page<Run>>(`/api/v1/runs?${query.toString()}`, signal),
    [query.toString()],
    before.length === 0 ? 5000 : 0,
  );
  const shown = (data?.items ?? []).filter(
    (r) => !since || Date.parse(r.createdAt) >= Date.now() - Number(since),
  );
  return (
    <Section title="Runs">
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Status{' '}
          <select
            value={status}
            onChange={(e) => (setStatus((e.target as HTMLSelectElement).value), setBefore([]))}
          >
            <option value="">any</option>
            {RUN_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s.replace(/_/g, ' ')}
              </option>
            ))}
          </select>
        </label>
        <label>
          Task id{' '}
          <input
            value={taskId}
            onChange={(e) => (setTaskId((e.target as HTMLInputElement).value), setBefore([]))}
          />
        </label>
        <label>
          Worker{' '}
          <select
            value={workerId}
            onChange={(e) => (setWorkerId((e.target as HTMLSelectElement).value), setBefore([]))}
          >
            <option value="">any</option>
            {(workers.data?.items ?? []).map((w) => (
              <option key={w.workerId} value={w.workerId}>
                {w.workerId}
              </option>
            ))}
          </select>
        </label>
        <label>
          Created{' '}
          <select value={since} onChange={(e) => setSince((e.target as HTMLSelectElement).value)}>
            <option value="">any time</option>
            <option value={String(3600_000)}>last hour</option>
            <option value={String(86_400_000)}>last day</option>
            <option value={String(7 * 86_400_000)}>last week</option>
          </select>
        </label>
      </form>
      <ErrorNote error={error} />
      {!data ? <Loading what="runs" /> : <RunsTable runs={shown} tasks={tasks} />}
      <div class="pager">
        <button type="button" disabled={before.length === 0} onClick={() => setBefore(before.slice(0, -1))}>
          Newer
        </button>
        <button
          type="button"
          disabled={!data?.nextBefore}
          onClick={() => data?.nextBefore && setBefore([...before, data.nextBefore])}
        >
          Older
        </button>
      </div>
    </Section>
  );
}

/** Follows the run's output with the long-poll tail until the run ends and every chunk is read. */
function useLiveLog(runId: string, onActivity: () => void) {
  const [entries, setEntries] = useState<LogEntry[]>([]);
  const [ended, setEnded] = useState(false);
  const [truncated, setTruncated] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    let after = 0;
    setEntries([]);
    setEnded(false);
    (async () => {
      for (;;) {
        try {
          const page = await get<LogPage>(
            `/api/v1/runs/${runId}/logs?after=${after}&limit=200&wait=20&view=ansi`,
            controller.signal,
          );
          after = page.nextAfter;
          if (page.items.length > 0) {
            setEntries((old) => [...old, ...page.items]);
            onActivity();
          }
          setTruncated(page.truncated);
          if (page.runEnded && page.items.length === 0) {
            setEnded(true);
            onActivity();
            return;
          }
          setError(null);
        } catch (e) {
          if (controller.signal.aborted) return;
          setError(e instanceof Error ? e.message : String(e));
          await new Promise((resolve) => setTimeout(resolve, 2000));
        }
      }
    })();
    return () => controller.abort();
    // The callback only asks the run's view to refresh; a new one must not restart the tail.
  }, [runId]);
  return { entries, ended, truncated, error };
}

function LiveLog({ runId, onActivity }: { runId: string; onActivity: () => void }) {
  const { entries, ended, truncated, error } = useLiveLog(runId, onActivity);
  const [search, setSearch] = useState('');
  const box = useRef<HTMLPreElement>(null);
  const lines = useMemo(
    () => (search ? entries.filter((e) => e.text.toLowerCase().includes(search.toLowerCase())) : entries),
    [entries, search],
  );
  useEffect(() => {
    const el = box.current;
    if (el && !search) el.scrollTop = el.scrollHeight;
  }, [lines.length, search]);
  const download = () => {
    const blob = new Blob([entries.map((e) => e.text).join('')], { type: 'text/plain' });
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = `run-${runId}.log`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  return (
    <div class="log-view">
      <div class="log-tools">
        <label>
          Search{' '}
          <input
            type="search"
            value={search}
            onInput={(e) => setSearch((e.target as HTMLInputElement).value)}
          />
        </label>
        <button type="button" onClick={download} disabled={entries.length === 0}>
          Download
        </button>
        <span class="muted" role="status" aria-live="polite">
          {ended ? 'The run ended; this is its whole log.' : 'Following the log…'}
          {truncated ? ' Output past the stored cap was dropped.' : ''}
        </span>
      </div>
      <ErrorNote error={error} />
      <pre class="log" ref={box} tabIndex={0} role="log" aria-label="Run log" data-testid="run-log">
        {lines.map((e) => (
          <span key={e.position} class={`stream-${e.stream}`}>
            <AnsiText text={e.text} />
          </span>
        ))}
      </pre>
    </div>
  );
}

const PENDING_REASONS: Record<string, string> = {
  architecture: 'another CPU architecture',
  os: 'another operating system',
  executor: 'no such executor',
  runtime: 'runtime missing',
  label: 'labels do not match',
  memory: 'not enough memory',
  disk: 'not enough disk',
  gpu: 'no matching GPU',
  capacity: 'no free slot',
  draining: 'draining',
  expired: 'session expired',
  worker_version: 'worker software too old for the task',
  wire_version: 'worker speaks protocol v1 (secrets and bundles need v2)',
};

/** An event's detail as words: `trigger manual, revision 1`, not JSON. */
function readableDetail(detail: Record<string, unknown>): string {
  return Object.entries(detail)
    .map(([key, value]) => {
      const words = key.replace(/([A-Z])/g, ' $1').toLowerCase();
      if (value === null || value === undefined) return `${words} none`;
      return `${words} ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`;
    })
    .join(', ');
}

/** ": lacks zone (2), gpu (1)": the task's required label keys the refused workers lack. */
function missingLabelsText(missing: Record<string, number> | undefined): string {
  const parts = Object.entries(missing ?? {}).map(([key, n]) => `${key} (${n})`);
  return parts.length > 0 ? `: lacks ${parts.join(', ')}` : '';
}

export function RunPage({ runId, admin }: { runId: string; admin: boolean }) {
  const {
    data: run,
    error,
    reload,
  } = useLoad((signal) => get<RunDetail>(`/api/v1/runs/${runId}`, signal), [runId], 2000);
  return (
    <Section
      title={`Run ${runId.slice(-12)}`}
      actions={
        admin && run && !ENDED.has(run.status) ? (
          <ConfirmButton
            label="Cancel"
            danger
            question="Cancel this run?"
            onConfirm={async () => {
              await api('POST', `/api/v1/runs/${runId}/cancel`);
              reload();
            }}
          />
        ) : null
      }
    >
      <ErrorNote error={error} />
      {!run ? (
        <Loading what="the run" />
      ) : (
        <>
          <dl class="facts">
            <dt>Status</dt>
            <dd data-testid="run-status">
              <Status value={run.status} />
              {run.cancelRequested && !ENDED.has(run.status) ? ' (cancel requested)' : ''}
            </dd>
            <dt>Task</dt>
            <dd>
              <a href={href('tasks', run.taskId)}>{run.taskName ?? run.taskId.slice(-12)}</a>, revision{' '}
              {run.revision}
            </dd>
            <dt>Created</dt>
            <dd>{when(run.createdAt)}</dd>
            <dt>Took</dt>
            <dd>{duration(run.createdAt, run.finishedAt)}</dd>
            {run.envVars?.length ? (
              <>
                <dt>Env vars received</dt>
                <dd>
                  {run.envVars.map((v) => `${v.name} v${v.version}${v.secret ? ' (secret)' : ''}`).join(', ')}
                </dd>
              </>
            ) : null}
          </dl>
          {run.pending && !ENDED.has(run.status) ? (
            <div class="pending" role="status">
              <h3>Why it waits</h3>
              <p>
                {run.pending.matching} of {run.pending.considered} workers could take it.
              </p>
              <ul>
                {Object.entries(run.pending.reasons)
                  .filter(([, n]) => n > 0)
                  .map(([reason, n]) => (
                    <li key={reason}>
                      {n} × {PENDING_REASONS[reason] ?? reason}
                      {reason === 'label' ? missingLabelsText(run.pending?.missingLabels) : null}
                    </li>
                  ))}
              </ul>
            </div>
          ) : null}
          <h3>Log</h3>
          <LiveLog runId={runId} onActivity={reload} />
          <h3>Attempts</h3>
          <div class="table-wrap" role="region" aria-label="Attempts" tabIndex={0}>
            <table>
              <caption class="visually-hidden">Attempts</caption>
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Status</th>
                  <th scope="col">Worker</th>
                  <th scope="col">Exit code</th>
                  <th scope="col">Error</th>
                  <th scope="col">Took</th>
                </tr>
              </thead>
              <tbody>
                {run.attempts.map((a) => (
                  <tr key={a.id}>
                    <th scope="row">{a.attemptNo}</th>
                    <td>
                      <Status value={a.status} />
                    </td>
                    <td>{a.workerId ? <a href={href('workers', a.workerId)}>{a.workerId}</a> : '—'}</td>
                    <td>{a.exitCode ?? '—'}</td>
                    <td data-testid="attempt-error">
                      {a.errorCode ? <code>{a.errorCode}</code> : null}
                      {a.errorSummary ? <span> {a.errorSummary}</span> : a.errorCode ? null : '—'}
                    </td>
                    <td>{duration(a.createdAt, a.finishedAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <h3>Timeline</h3>
          <ol class="timeline">
            {run.events.map((e) => (
              <li key={e.seq}>
                <time dateTime={e.at}>{when(e.at)}</time> {e.type.replace(/_/g, ' ')}
                {e.detail ? <span class="muted"> {readableDetail(e.detail)}</span> : null}
              </li>
            ))}
          </ol>
        </>
      )}
    </Section>
  );
}
