import { useState } from 'preact/hooks';
import { get } from '../api';
import { when } from '../format';
import type { AuditEntry } from '../types';
import { ErrorNote, Loading, Section, useLoad } from '../ui';

export function AuditPage({ admin }: { admin: boolean }) {
  const [filter, setFilter] = useState('');
  const { data, error } = useLoad(
    (signal) =>
      admin
        ? get<{ items: AuditEntry[] }>('/api/v1/audit?limit=200', signal)
        : Promise.resolve({ items: [] }),
    [admin],
    10_000,
  );
  if (!admin)
    return (
      <Section title="Audit">
        <p class="muted">The audit log needs an admin key.</p>
      </Section>
    );
  const needle = filter.toLowerCase();
  const items = (data?.items ?? []).filter(
    (e) => !needle || [e.actor, e.action, e.target].some((v) => v.toLowerCase().includes(needle)),
  );
  return (
    <Section title="Audit">
      <label class="filters">
        Filter (actor, action or target){' '}
        <input
          type="search"
          value={filter}
          onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
        />
      </label>
      <ErrorNote error={error} />
      {!data ? (
        <Loading what="the audit log" />
      ) : (
        <div class="table-wrap" role="region" aria-label="Audit log, newest first" tabIndex={0}>
          <table>
            <caption class="visually-hidden">Audit log, newest first</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Who</th>
                <th scope="col">What</th>
                <th scope="col">Target</th>
                <th scope="col">Detail</th>
              </tr>
            </thead>
            <tbody>
              {items.map((e) => (
                <tr key={e.id}>
                  <td>{when(e.at)}</td>
                  <td>{e.actor}</td>
                  <td>{e.action}</td>
                  <td>{e.target}</td>
                  <td>{e.detail ? <code>{JSON.stringify(e.detail)}</code> : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}
