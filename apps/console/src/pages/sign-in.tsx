import { useState } from 'preact/hooks';
import { Session, api } from '../api';
import { ErrorNote } from '../ui';

/** The API key is sent once and forgotten: the page keeps only what the session answer gives. */
export function SignInPage({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const input = form.elements.namedItem('apiKey') as HTMLInputElement;
    const apiKey = input.value.trim();
    input.value = '';
    setBusy(true);
    try {
      onSignedIn(await api<Session>('POST', '/api/v1/session', { apiKey }));
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="sign-in">
      <h1>QingLong workers</h1>
      <form onSubmit={submit}>
        <label for="apiKey">API key</label>
        <input id="apiKey" name="apiKey" type="password" autocomplete="off" required placeholder="qlk_…" />
        <p class="muted">
          Make one with <code>npm run api-key -- --name me --role admin</code>. It is exchanged for a session
          and not kept in this browser.
        </p>
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
        <ErrorNote error={error} />
      </form>
    </main>
  );
}
