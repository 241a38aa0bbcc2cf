import { useState } from 'preact/hooks';
import { ApiError, api, get } from '../api';
import { Field } from '../fields';
import { when } from '../format';
import { ConfirmButton, ErrorNote, Loading, Section, Status, useLoad } from '../ui';

interface ApiKey {
  readonly id: string;
  readonly name: string;
  readonly role: 'viewer' | 'admin';
  readonly createdAt: string;
  readonly revokedAt: string | null;
}
interface EnrollmentToken {
  readonly id: string;
  readonly workerId: string | null;
  readonly pattern: string | null;
  readonly maxWorkers: number;
  readonly uses: number;
  readonly status: string;
  readonly expiresAt: string;
  readonly createdAt: string;
}

const message = (e: unknown) => (e instanceof ApiError || e instanceof Error ? e.message : String(e));

/** A secret shown once, right after it was made: it is stored only as a digest. */
function ShownOnce({ label, secret }: { label: string; secret: string }) {
  return (
    <div class="pending" role="status">
      <p>{label} — shown this once; only its digest is kept. Copy it now:</p>
      <code class="once" data-testid="shown-once">
        {secret}
      </code>
    </div>
  );
}

/**
 * Who may reach the control plane (issue 31 item 3): API keys (admin or viewer) and the enrollment
 * tokens machines join with (ADR 0045). Admins only; tokens and keys are shown once, when made.
 */
export function AccessPage({ admin }: { admin: boolean }) {
  if (!admin)
    return (
      <Section title="Access">
        <p class="muted">API keys and enrollment tokens need an admin key.</p>
      </Section>
    );
  return (
    <>
      <ApiKeys />
      <EnrollmentTokens />
    </>
  );
}

function ApiKeys() {
  const { data, error, reload } = useLoad(
    (signal) => get<{ items: ApiKey[] }>('/api/v1/api-keys', signal),
    [],
  );
  const [name, setName] = useState('');
  const [role, setRole] = useState('viewer');
  const [made, setMade] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const key = await api<{ token: string }>('POST', '/api/v1/api-keys', { name, role });
      setMade(key.token);
      setName('');
      setFailure(null);
      reload();
    } catch (err) {
      setFailure(message(err));
    }
  };
  return (
    <Section title="API keys">
      <ErrorNote error={error} />
      {!data ? (
        <Loading what="the API keys" />
      ) : (
        <div class="table-wrap" role="region" aria-label="API keys" tabIndex={0}>
          <table>
            <caption class="visually-hidden">API keys</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Created</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((k) => (
                <tr key={k.id}>
                  <th scope="row">{k.name}</th>
                  <td>{k.role}</td>
                  <td>{when(k.createdAt)}</td>
                  <td>
                    {k.revokedAt ? (
                      `revoked ${when(k.revokedAt)}`
                    ) : (
                      <ConfirmButton
                        label="Revoke"
                        danger
                        question={`Revoke ${k.name}? Its sessions end at once.`}
                        onConfirm={() => api('POST', `/api/v1/api-keys/${k.id}/revoke`).then(reload)}
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form class="task-form" onSubmit={create} aria-label="New API key">
        <Field id="key-name" label="New key's name" value={name} onValue={setName} required />
        <Field
          id="key-role"
          label="Role"
          kind="select"
          value={role}
          onValue={setRole}
          options={[
            ['viewer', 'viewer (reads)'],
            ['admin', 'admin (reads and changes)'],
          ]}
        />
        <button type="submit" class="primary">
          Create key
        </button>
        <ErrorNote error={failure} />
      </form>
      {made ? <ShownOnce label="The new key" secret={made} /> : null}
    </Section>
  );
}

function EnrollmentTokens() {
  const { data, error, reload } = useLoad(
    (signal) => get<{ items: EnrollmentToken[] }>('/api/v1/enrollment-tokens?limit=200', signal),
    [],
  );
  const [workerId, setWorkerId] = useState('');
  const [made, setMade] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const token = await api<{ token: string }>('POST', '/api/v1/enrollment-tokens', { workerId });
      setMade(token.token);
      setWorkerId('');
      setFailure(null);
      reload();
    } catch (err) {
      setFailure(message(err));
    }
  };
  return (
    <Section title="Enrollment tokens">
      <p class="muted">
        A machine joins with a token: <code>QL_WORKER_ENROLL_TOKEN</code> (see the README, "Adding a worker
        machine"). Patterns and counts: <code>npm run enroll-token -- create --help</code>.
      </p>
      <ErrorNote error={error} />
      {!data ? (
        <Loading what="the tokens" />
      ) : data.items.length === 0 ? (
        <p class="muted">No tokens yet.</p>
      ) : (
        <div class="table-wrap" role="region" aria-label="Enrollment tokens" tabIndex={0}>
          <table>
            <caption class="visually-hidden">Enrollment tokens</caption>
            <thead>
              <tr>
                <th scope="col">For</th>
                <th scope="col">Uses</th>
                <th scope="col">Status</th>
                <th scope="col">Expires</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((t) => (
                <tr key={t.id}>
                  <th scope="row">
                    <code>{t.workerId ?? t.pattern}</code>
                  </th>
                  <td>
                    {t.uses} of {t.maxWorkers}
                  </td>
                  <td>
                    <Status value={t.status} />
                  </td>
                  <td>{when(t.expiresAt)}</td>
                  <td>
                    {t.status === 'active' ? (
                      <ConfirmButton
                        label="Revoke"
                        danger
                        question="Revoke this token? Workers it enrolled stay."
                        onConfirm={() => api('DELETE', `/api/v1/enrollment-tokens/${t.id}`).then(reload)}
                      />
                    ) : (
                      '—'
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form class="task-form" onSubmit={create} aria-label="New enrollment token">
        <Field
          id="token-worker"
          label="Worker id"
          value={workerId}
          onValue={setWorkerId}
          required
          hint="The id the machine will have, e.g. router-shanghai-01"
        />
        <button type="submit" class="primary">
          Create token
        </button>
        <ErrorNote error={failure} />
      </form>
      {made ? <ShownOnce label="The new token" secret={made} /> : null}
    </Section>
  );
}
