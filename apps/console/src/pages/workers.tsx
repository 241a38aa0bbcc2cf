import { api, get } from '../api';
import { age, expiry, when } from '../format';
import { go, href } from '../router';
import type { Page, Run, Worker, WorkerDetail } from '../types';
import { ConfirmButton, ErrorNote, Loading, Section, Status, useLoad } from '../ui';
import { RunsTable, useTaskNames } from './runs';

const slots = (w: Worker) =>
  w.maxConcurrentRuns === null || w.availableSlots === null
    ? '—'
    : `${w.maxConcurrentRuns - w.availableSlots}/${w.maxConcurrentRuns}`;

function Labels({ labels }: { labels: Record<string, string> | null | undefined }) {
  const entries = Object.entries(labels ?? {});
  if (entries.length === 0) return <span class="muted">—</span>;
  return (
    <span class="labels">
      {entries.map(([k, v]) => (
        <span key={k} class="label">
          {v === '' ? k : `${k}=${v}`}
        </span>
      ))}
    </span>
  );
}

/** Its current certificate's expiry; a warning (not by colour alone) under 20 % of its life left. */
function CertificateExpiry({ worker }: { worker: Worker }) {
  const e = expiry(worker.certificateIssuedAt, worker.certificateNotAfter);
  if (!e) return <span class="muted">— (not enrolled)</span>;
  return (
    <span class={e.warn ? 'cert-warn' : ''} title={when(worker.certificateNotAfter)}>
      {e.warn ? <span aria-hidden="true">⚠ </span> : null}
      {e.warn ? <span class="visually-hidden">Warning: </span> : null}
      {e.text}
    </span>
  );
}

export function WorkersPage() {
  const { data, error } = useLoad(
    (signal) => get<Page<Worker>>('/api/v1/workers?limit=200', signal),
    [],
    5000,
  );
  return (
    <Section title="Workers">
      <ErrorNote error={error} />
      {!data ? (
        <Loading what="workers" />
      ) : data.items.length === 0 ? (
        <p class="muted">No worker has registered yet. Start one (README: “Adding a worker machine”).</p>
      ) : (
        <div class="table-wrap" role="region" aria-label="Workers" tabIndex={0}>
          <table>
            <caption class="visually-hidden">Workers</caption>
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">Status</th>
                <th scope="col">Slots used</th>
                <th scope="col">Labels</th>
                <th scope="col">Version</th>
                <th scope="col">Last heartbeat</th>
                <th scope="col">Certificate expires</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((w) => (
                <tr key={w.workerId}>
                  <th scope="row">
                    <a href={href('workers', w.workerId)}>{w.workerId}</a>
                  </th>
                  <td>
                    <Status value={w.status} />
                  </td>
                  <td>{slots(w)}</td>
                  <td>
                    <Labels labels={w.capabilities?.labels} />
                  </td>
                  <td>{w.softwareVersion ?? '—'}</td>
                  <td title={when(w.lastSeenAt)}>{age(w.lastSeenAt)}</td>
                  <td>
                    <CertificateExpiry worker={w} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}

export function WorkerPage({ workerId, admin }: { workerId: string; admin: boolean }) {
  const path = `/api/v1/workers/${encodeURIComponent(workerId)}`;
  const { data: w, error, reload } = useLoad((signal) => get<WorkerDetail>(path, signal), [workerId], 5000);
  const runs = useLoad(
    (signal) => get<Page<Run>>(`/api/v1/runs?workerId=${encodeURIComponent(workerId)}&limit=20`, signal),
    [workerId],
    5000,
  );
  const tasks = useTaskNames();
  const act = (action: string) => async () => {
    await api('POST', `${path}/${action}`);
    reload();
  };
  return (
    <Section
      title={`Worker ${workerId}`}
      actions={
        admin && w ? (
          <div class="actions">
            {w.status === 'online' && (
              <ConfirmButton label="Drain" question="Stop giving it new runs?" onConfirm={act('drain')} />
            )}
            {w.status === 'draining' && (
              <ConfirmButton label="Resume" question="Give it new runs again?" onConfirm={act('resume')} />
            )}
            {w.disabled ? (
              <ConfirmButton
                label="Enable"
                question="Allow it to register again?"
                onConfirm={act('enable')}
              />
            ) : (
              <ConfirmButton
                label="Disable"
                danger
                question="Fence its session now?"
                onConfirm={act('disable')}
              />
            )}
            {(w.status === 'offline' || w.status === 'expired' || w.status === 'disabled') && (
              <ConfirmButton
                label="Delete"
                danger
                question="Delete this worker?"
                onConfirm={async () => {
                  await api('DELETE', path);
                  go('workers');
                }}
              />
            )}
          </div>
        ) : null
      }
    >
      <ErrorNote error={error} />
      {!w ? (
        <Loading what="the worker" />
      ) : (
        <>
          <dl class="facts">
            <dt>Status</dt>
            <dd>
              <Status value={w.status} />
            </dd>
            <dt>Slots used</dt>
            <dd>{slots(w)}</dd>
            <dt>Version</dt>
            <dd>{w.softwareVersion ?? '—'}</dd>
            <dt>Protocol</dt>
            <dd>{w.wireVersion ? `v${w.wireVersion} (protocol ${w.protocolVersion})` : '—'}</dd>
            <dt>Registered</dt>
            <dd>{when(w.registeredAt)}</dd>
            <dt>Last heartbeat</dt>
            <dd title={when(w.lastSeenAt)}>{age(w.lastSeenAt)}</dd>
            <dt>Labels</dt>
            <dd>
              <Labels labels={w.capabilities?.labels} />
            </dd>
            <dt>Certificate</dt>
            <dd data-testid="worker-certificate">
              <CertificateExpiry worker={w} />
            </dd>
          </dl>
          <h3>Active runs</h3>
          {(w.activeRuns ?? []).length === 0 ? (
            <p class="muted">None.</p>
          ) : (
            <ul>
              {w.activeRuns!.map((r) => (
                <li key={r.attemptId}>
                  <a href={href('runs', r.runId)}>{r.runId}</a>
                </li>
              ))}
            </ul>
          )}
          <h3>Recent runs on this worker</h3>
          <p class="muted">The last 20 runs any attempt of which ran here, newest first.</p>
          {runs.data ? (
            <RunsTable runs={runs.data.items} tasks={tasks} label="Recent runs on this worker" />
          ) : (
            <Loading what="runs" />
          )}
          <h3>Capabilities</h3>
          <pre class="json" tabIndex={0}>
            {JSON.stringify(w.capabilities, null, 2)}
          </pre>
        </>
      )}
    </Section>
  );
}
