import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api';

/** Data from the API for a view, reloaded on `deps` and every `everyMs` when given. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], everyMs = 0) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  useEffect(() => {
    const controller = new AbortController();
    load(controller.signal).then(
      (value) => {
        setData(value);
        setError(null);
      },
      (e: unknown) => {
        if (!controller.signal.aborted) setError(e instanceof Error ? e.message : String(e));
      },
    );
    const timer = everyMs > 0 ? setTimeout(reload, everyMs) : undefined;
    return () => {
      controller.abort();
      clearTimeout(timer);
    };
  }, [...deps, tick]);
  return { data, error, reload };
}

export function Status({ value }: { value: string }) {
  return <span class={`status status-${value}`}>{value.replace(/_/g, ' ')}</span>;
}

export function ErrorNote({ error }: { error: string | null }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

export function Loading({ what }: { what: string }) {
  return <p class="muted">Loading {what}…</p>;
}

/** A button that asks once more before it acts; the question and both answers are real buttons. */
export function ConfirmButton(props: {
  label: string;
  question: string;
  danger?: boolean;
  onConfirm: () => Promise<unknown>;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const act = async () => {
    setBusy(true);
    try {
      await props.onConfirm();
      setAsking(false);
      setError(null);
    } catch (e) {
      setError(e instanceof ApiError || e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  if (!asking)
    return (
      <span class="confirm">
        <button type="button" class={props.danger ? 'danger' : ''} onClick={() => setAsking(true)}>
          {props.label}
        </button>
        <ErrorNote error={error} />
      </span>
    );
  return (
    <span class="confirm asking" role="group" aria-label={props.question}>
      <span>{props.question}</span>
      <button type="button" class={props.danger ? 'danger' : 'primary'} disabled={busy} onClick={act}>
        Yes, {props.label.toLowerCase()}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        No
      </button>
    </span>
  );
}

export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section>
      <div class="section-head">
        <h2>{props.title}</h2>
        {props.actions}
      </div>
      {props.children}
    </section>
  );
}
