import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, Session, api, get, useSession } from './api';
import { href, useRoute } from './router';
import { AuditPage } from './pages/audit';
import { AccessPage } from './pages/access';
import { DashboardPage } from './pages/dashboard';
import { EnvVarsPage } from './pages/env-vars';
import { RunPage, RunsPage } from './pages/runs';
import { SignInPage } from './pages/sign-in';
import { TaskEditPage, TaskPage, TasksPage } from './pages/tasks';
import { WorkerPage, WorkersPage } from './pages/workers';

const NAV = [
  ['dashboard', 'Dashboard'],
  ['workers', 'Workers'],
  ['tasks', 'Tasks'],
  ['runs', 'Runs'],
  ['env', 'Env vars'],
  ['access', 'Access'],
  ['audit', 'Audit'],
] as const;

function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const route = useRoute();
  useSession(session ?? null, () => setSession(null));
  useEffect(() => {
    get<Session>('/api/v1/session').then(setSession, (e: unknown) => {
      if (e instanceof ApiError && (e.status === 401 || e.status === 404)) setSession(null);
      else setSession(null);
    });
  }, []);
  if (session === undefined) return <p class="boot">Loading the console…</p>;
  if (session === null) return <SignInPage onSignedIn={setSession} />;
  const admin = session.role === 'admin';
  const [page, id, sub] = route;
  const signOut = async () => {
    await api('DELETE', '/api/v1/session').catch(() => undefined);
    setSession(null);
  };
  return (
    <>
      <header class="top">
        <a class="brand" href={href('dashboard')}>
          QingLong workers
        </a>
        <nav aria-label="Main">
          {NAV.map(([key, label]) => (
            <a key={key} href={href(key)} aria-current={page === key ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span class="who">
          {session.keyName} <span class="role">({session.role})</span>
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </span>
      </header>
      <main id="main">
        {page === 'workers' && id ? (
          <WorkerPage workerId={id} admin={admin} />
        ) : page === 'workers' ? (
          <WorkersPage />
        ) : page === 'tasks' && id === 'new' ? (
          <TaskEditPage admin={admin} />
        ) : page === 'tasks' && id && sub === 'edit' ? (
          <TaskEditPage admin={admin} taskId={id} />
        ) : page === 'tasks' && id ? (
          <TaskPage taskId={id} admin={admin} />
        ) : page === 'tasks' ? (
          <TasksPage admin={admin} />
        ) : page === 'runs' && id ? (
          <RunPage runId={id} admin={admin} />
        ) : page === 'runs' ? (
          <RunsPage />
        ) : page === 'access' ? (
          <AccessPage admin={admin} />
        ) : page === 'env' ? (
          <EnvVarsPage admin={admin} />
        ) : page === 'audit' ? (
          <AuditPage admin={admin} />
        ) : (
          <DashboardPage />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
