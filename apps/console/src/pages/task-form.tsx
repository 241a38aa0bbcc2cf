import { useState } from 'preact/hooks';
import { api, get } from '../api';
import { CronPreview } from '../cron-preview';
import { Field, PairsField, filledRows } from '../fields';
import { when } from '../format';
import { go, href } from '../router';
import type { Bundle, Page, Secret, Task, TaskSpec } from '../types';
import { ErrorNote, Section, useLoad } from '../ui';

/**
 * The task form (create and edit): every field the task API models that a person sets by hand, each
 * through `Field` or `PairsField`; on edit, the fields it does not show are sent back as they were.
 */
const RUNTIMES = ['shell', 'node', 'python'];

export const pairsOf = (record: Record<string, string> | null | undefined): string[][] =>
  Object.entries(record ?? {});
const recordOf = (rows: string[][]) => Object.fromEntries(filledRows(rows).map(([k, v]) => [k!, v ?? '']));
/** `key` with `value` when the form has one, null when it had one and has none now, else left out. */
const optional = <T,>(key: string, value: T | null, had: unknown) =>
  value !== null ? { [key]: value } : had !== undefined && had !== null ? { [key]: null } : {};

export function TaskForm({ task }: { task: Task | null }) {
  const spec = task?.spec;
  const [name, setName] = useState(spec?.name ?? '');
  const [command, setCommand] = useState(spec?.command ?? '');
  const [runtime, setRuntime] = useState(spec?.runtime ?? 'shell');
  const [timeout, setTimeoutSeconds] = useState(spec?.timeoutMs ? String(spec.timeoutMs / 1000) : '');
  const [cron, setCron] = useState(spec?.cron ?? '');
  const [timezone, setTimezone] = useState(spec?.timezone ?? 'UTC');
  const [attempts, setAttempts] = useState(spec?.retry ? String(spec.retry.maxAttempts) : '');
  const [backoff, setBackoff] = useState(spec?.retry ? String(spec.retry.initialBackoffMs / 1000) : '10');
  const [labels, setLabels] = useState(pairsOf(spec?.placement?.required?.labels));
  const [preferred, setPreferred] = useState(
    (spec?.placement?.preferred ?? []).map((p) => [p.key, p.value, String(p.weight)]),
  );
  const [bundle, setBundle] = useState(spec?.bundle?.digest ?? '');
  const [workdir, setWorkdir] = useState(spec?.bundle?.workdir ?? '.');
  const [secretEnv, setSecretEnv] = useState(pairsOf(spec?.secretEnv));
  const bundles = useLoad((signal) => get<Page<Bundle>>('/api/v1/bundles?limit=200', signal), []);
  const secrets = useLoad((signal) => get<Page<Secret>>('/api/v1/secrets?limit=200', signal), []);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const required = recordOf(labels);
    const preferList = filledRows(preferred).map(([key, value, weight]) => ({
      key: key!,
      value: value ?? '',
      weight: Number(weight || 1),
    }));
    const placed = Object.keys(required).length > 0 || preferList.length > 0;
    const mapped = recordOf(secretEnv);
    const body: TaskSpec = {
      ...(spec ?? {}),
      name: name.trim(),
      command,
      runtime,
      cron: cron.trim() || null,
      timezone: cron.trim() ? timezone.trim() || 'UTC' : null,
      ...(timeout.trim() ? { timeoutMs: Number(timeout) * 1000 } : {}),
      ...(placed || spec?.placement
        ? {
            placement: {
              ...(spec?.placement ?? {}),
              required: { ...(spec?.placement?.required ?? {}), labels: placed ? required : null },
              preferred: preferList.length > 0 ? preferList : null,
            },
          }
        : {}),
      ...optional(
        'retry',
        Number(attempts) >= 2
          ? {
              ...(spec?.retry ?? {}),
              maxAttempts: Number(attempts),
              initialBackoffMs: Number(backoff) * 1000,
            }
          : null,
        spec?.retry,
      ),
      ...optional('bundle', bundle ? { digest: bundle, workdir: workdir.trim() || '.' } : null, spec?.bundle),
      ...optional('secretEnv', Object.keys(mapped).length > 0 ? mapped : null, spec?.secretEnv),
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
  const bundleOptions: [string, string][] = [
    ['', 'none'],
    ...(bundles.data?.items ?? []).map((b): [string, string] => [
      b.digest,
      `${b.digest.slice(0, 12)} (${Math.ceil(b.sizeBytes / 1024)} KiB, ${when(b.createdAt)})`,
    ]),
  ];
  if (bundle && !bundleOptions.some(([d]) => d === bundle)) bundleOptions.push([bundle, bundle.slice(0, 12)]);
  return (
    <Section title={task ? `Edit ${task.name}` : 'New task'}>
      <form class="task-form" onSubmit={submit}>
        <Field id="name" label="Name" required maxLength={100} value={name} onValue={setName} />
        <Field id="command" label="Command" kind="textarea" required value={command} onValue={setCommand} />
        <Field
          id="runtime"
          label="Runtime"
          kind="select"
          options={RUNTIMES.map((r) => [r, r])}
          value={runtime}
          onValue={setRuntime}
        />
        <Field
          id="timeoutSeconds"
          label="Timeout (seconds, empty for the default)"
          kind="number"
          min={1}
          value={timeout}
          onValue={setTimeoutSeconds}
        />
        <Field
          id="cron"
          label="Cron (empty: only when triggered)"
          placeholder="0 7 * * *"
          value={cron}
          onValue={setCron}
        />
        <Field id="timezone" label="Time zone" value={timezone} onValue={setTimezone} />
        <CronPreview cron={cron} timezone={timezone} />
        <Field
          id="attempts"
          label="Attempts in all (empty or 1: no retry)"
          kind="number"
          min={1}
          max={20}
          value={attempts}
          onValue={setAttempts}
        />
        <Field
          id="backoff"
          label="First retry after (seconds)"
          hint="each later retry waits twice as long"
          kind="number"
          min={1}
          value={backoff}
          onValue={setBackoff}
        />
        <PairsField
          legend="Required labels"
          hint="only workers with every one of these labels run it"
          columns={[
            { name: 'key', placeholder: 'zone' },
            { name: 'value', placeholder: 'lab' },
          ]}
          rows={labels}
          onRows={setLabels}
        />
        <PairsField
          legend="Preferred labels"
          hint="among the matching workers, those with these labels (weight 1–100) go first"
          columns={[
            { name: 'key', placeholder: 'disk' },
            { name: 'value', placeholder: 'ssd' },
            { name: 'weight', placeholder: '10', type: 'number' },
          ]}
          rows={preferred}
          onRows={setPreferred}
        />
        <Field
          id="bundle"
          label="Script bundle"
          hint="pushed with npm run bundle -- push"
          kind="select"
          options={bundleOptions}
          value={bundle}
          onValue={setBundle}
        />
        {bundle ? (
          <Field id="workdir" label="Folder in the bundle" value={workdir} onValue={setWorkdir} />
        ) : null}
        <PairsField
          legend="Secret env"
          hint="an env name the command gets, from a secret (several joined by &)"
          columns={[
            { name: 'env name', placeholder: 'JD_COOKIE' },
            { name: 'secret', placeholder: 'jd-cookie-1', list: 'secret-names' },
          ]}
          rows={secretEnv}
          onRows={setSecretEnv}
        />
        <datalist id="secret-names">
          {(secrets.data?.items ?? []).map((x) => (
            <option key={x.name} value={x.name} />
          ))}
        </datalist>
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
