import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, api, get } from '../api';
import { Field } from '../fields';
import { when } from '../format';
import type { EnvImportReport, EnvVar } from '../types';
import { ConfirmButton, ErrorNote, Loading, Section, useLoad } from '../ui';

const PATH = '/api/v1/env-vars';

/** Every variable, by position (at most 500 exist: a few pages). */
async function allEnvVars(signal: AbortSignal): Promise<EnvVar[]> {
  const items: EnvVar[] = [];
  let after: string | null = null;
  do {
    const query: string = after === null ? '' : `&after=${encodeURIComponent(after)}`;
    const page: { items: EnvVar[]; nextAfter: string | null } = await get(
      `${PATH}?limit=200${query}`,
      signal,
    );
    items.push(...page.items);
    after = page.nextAfter;
  } while (after !== null);
  return items;
}

const message = (e: unknown) => (e instanceof ApiError || e instanceof Error ? e.message : String(e));

/**
 * Global environment variables, QingLong's way (issue 31 item 2, ADR 0061): every task receives the
 * enabled ones in this order, a task's own `env` or `secretEnv` entry of a name wins. A secret one's
 * value is write-only: stored encrypted, never shown, hidden as `***` in run output.
 */
export function EnvVarsPage({ admin }: { admin: boolean }) {
  const { data, error, reload } = useLoad(allEnvVars, [], 0);
  return (
    <>
      <Section title="Environment variables">
        <p class="muted">
          Every task receives the enabled variables, in this order; a task's own env of the same name wins. A
          secret's value is stored encrypted, never shown again, and appears as *** in run output. Several
          values may be joined by &amp; or a line break, as QingLong does.
        </p>
        <ErrorNote error={error} />
        {!data ? (
          <Loading what="the variables" />
        ) : data.length === 0 ? (
          <p class="muted">No variables yet.</p>
        ) : (
          <EnvVarTable vars={data} admin={admin} changed={reload} />
        )}
      </Section>
      {admin ? <NewEnvVar created={reload} /> : null}
      {admin ? <ImportEnvVars imported={reload} /> : null}
    </>
  );
}

function EnvVarTable(props: { vars: EnvVar[]; admin: boolean; changed: () => void }) {
  const [editing, setEditing] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const act = async (call: () => Promise<unknown>) => {
    try {
      await call();
      setError(null);
      props.changed();
    } catch (e) {
      setError(message(e));
    }
  };
  const move = (index: number, by: -1 | 1) => {
    const names = props.vars.map((v) => v.name);
    [names[index], names[index + by]] = [names[index + by]!, names[index]!];
    return act(() => api('PUT', `${PATH}/order`, { names }));
  };
  return (
    <>
      <ErrorNote error={error} />
      <div class="table-wrap" role="region" aria-label="Environment variables, in order" tabIndex={0}>
        <table>
          <caption class="visually-hidden">Environment variables, in order</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Value</th>
              <th scope="col">Remark</th>
              <th scope="col">Enabled</th>
              <th scope="col">Updated</th>
              {props.admin ? <th scope="col">Actions</th> : null}
            </tr>
          </thead>
          <tbody>
            {props.vars.map((v, i) => (
              <tr key={v.name}>
                <th scope="row">
                  <code>{v.name}</code>
                </th>
                <td>{v.secret ? <span class="muted">secret (write-only)</span> : <code>{v.value}</code>}</td>
                <td>{v.remark || '—'}</td>
                <td>{v.enabled ? 'yes' : 'no'}</td>
                <td>
                  {when(v.updatedAt)} (v{v.version})
                </td>
                {props.admin ? (
                  <td>
                    <div class="actions">
                      {editing === v.name ? (
                        <EditEnvVar
                          envVar={v}
                          done={() => {
                            setEditing(null);
                            props.changed();
                          }}
                        />
                      ) : (
                        <>
                          <button
                            type="button"
                            onClick={() => setEditing(v.name)}
                            aria-label={`Edit ${v.name}`}
                          >
                            Edit
                          </button>
                          <button
                            type="button"
                            aria-label={`${v.enabled ? 'Disable' : 'Enable'} ${v.name}`}
                            onClick={() =>
                              act(() => api('PATCH', `${PATH}/${v.name}`, { enabled: !v.enabled }))
                            }
                          >
                            {v.enabled ? 'Disable' : 'Enable'}
                          </button>
                          <button
                            type="button"
                            aria-label={`Move ${v.name} up`}
                            disabled={i === 0}
                            onClick={() => move(i, -1)}
                          >
                            ↑
                          </button>
                          <button
                            type="button"
                            aria-label={`Move ${v.name} down`}
                            disabled={i === props.vars.length - 1}
                            onClick={() => move(i, 1)}
                          >
                            ↓
                          </button>
                          <ConfirmButton
                            label="Delete"
                            danger
                            question={`Delete ${v.name}? Runs already pinned keep what they received.`}
                            onConfirm={() => api('DELETE', `${PATH}/${v.name}`).then(props.changed)}
                          />
                        </>
                      )}
                    </div>
                  </td>
                ) : null}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

function EditEnvVar({ envVar, done }: { envVar: EnvVar; done: () => void }) {
  const [value, setValue] = useState(envVar.secret ? '' : (envVar.value ?? ''));
  const [remark, setRemark] = useState(envVar.remark);
  const [error, setError] = useState<string | null>(null);
  const id = `edit-${envVar.name}`;
  const save = async (e: Event) => {
    e.preventDefault();
    // A secret's empty field keeps its value: it is never shown, so it is only ever replaced.
    const change = { remark, ...(envVar.secret && value === '' ? {} : { value }) };
    try {
      await api('PATCH', `${PATH}/${envVar.name}`, change);
      done();
    } catch (err) {
      setError(message(err));
    }
  };
  return (
    <form class="task-form" onSubmit={save} aria-label={`Edit ${envVar.name}`}>
      <Field
        id={`${id}-value`}
        label={envVar.secret ? 'New value (empty keeps it)' : 'Value'}
        kind="textarea"
        rows={2}
        value={value}
        onValue={setValue}
      />
      <Field id={`${id}-remark`} label="Remark" value={remark} onValue={setRemark} />
      <button type="submit" class="primary">
        Save
      </button>
      <button type="button" onClick={done}>
        Cancel
      </button>
      <ErrorNote error={error} />
    </form>
  );
}

function NewEnvVar({ created }: { created: () => void }) {
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [remark, setRemark] = useState('');
  const [secret, setSecret] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      await api('POST', PATH, { name, value, secret, remark });
      setName('');
      setValue('');
      setRemark('');
      setError(null);
      created();
    } catch (err) {
      setError(message(err));
    }
  };
  return (
    <Section title="New variable">
      <form class="task-form" onSubmit={submit}>
        <Field
          id="env-name"
          label="Name"
          value={name}
          onValue={setName}
          required
          hint="Letters, digits and _, as a shell names it"
        />
        <Field
          id="env-value"
          label="Value"
          kind="textarea"
          rows={3}
          value={value}
          onValue={setValue}
          hint="Several accounts: join them with & or put one per line"
        />
        <Field id="env-remark" label="Remark" value={remark} onValue={setRemark} />
        <label>
          <input
            type="checkbox"
            checked={secret}
            onChange={(e) => setSecret((e.target as HTMLInputElement).checked)}
          />{' '}
          Secret (encrypted, write-only, shown as *** in output)
        </label>
        <button type="submit" class="primary">
          Add variable
        </button>
        <ErrorNote error={error} />
      </form>
    </Section>
  );
}

function ImportEnvVars({ imported }: { imported: () => void }) {
  const [content, setContent] = useState('');
  const [plain, setPlain] = useState('');
  const [report, setReport] = useState<EnvImportReport | null>(null);
  const [error, setError] = useState<string | null>(null);
  const run = async (apply: boolean) => {
    try {
      const names = plain
        .split(/[\s,]+/)
        .map((n) => n.trim())
        .filter(Boolean);
      const answer = await api<EnvImportReport>('POST', `${PATH}/import`, { content, apply, plain: names });
      setReport(answer);
      setError(null);
      if (apply) imported();
    } catch (e) {
      setError(message(e));
    }
  };
  return (
    <Section title="Import">
      <p class="muted">
        An <code>export NAME="value"</code> file or QingLong's env JSON export. Every variable is a secret
        unless named as plain. Preview first: nothing is written until you import.
      </p>
      <div class="task-form">
        <Field
          id="import-content"
          label="File content"
          kind="textarea"
          rows={6}
          value={content}
          onValue={setContent}
        />
        <Field
          id="import-plain"
          label="Plain variables (names, comma separated)"
          value={plain}
          onValue={setPlain}
        />
        <span>
          <button type="button" onClick={() => run(false)}>
            Preview
          </button>{' '}
          <button type="button" class="primary" onClick={() => run(true)}>
            Import
          </button>
        </span>
        <ErrorNote error={error} />
        {report ? (
          <dl class="facts" aria-label="Import report">
            <dt>{report.applied ? 'Imported' : 'Would import'}</dt>
            <dd>
              create {report.create.length}, update {report.update.length}, unchanged{' '}
              {report.unchanged.length}
            </dd>
            {report.create.length ? (
              <>
                <dt>New</dt>
                <dd>{report.create.join(', ')}</dd>
              </>
            ) : null}
            {[...report.refused, ...report.skipped].map((s, i) => (
              <Fragment key={i}>
                <dt>{s.at}</dt>
                <dd>{s.reason}</dd>
              </Fragment>
            ))}
          </dl>
        ) : null}
      </div>
    </Section>
  );
}
