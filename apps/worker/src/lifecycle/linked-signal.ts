/**
 * A signal that aborts when either of two does, with the reason of the first, and `unlink()`, which
 * takes its listeners off both (ADR 0049). `AbortSignal.any([call, stop])` does the same but cannot be
 * undone: on Node 20 every signal it makes leaves a WeakRef in the source's set of dependants for as
 * long as the source lives, and the worker's stop signal lives as long as the worker; one per lease
 * call grew the worker's heap under load. Call `unlink()` once the call has settled.
 */
export interface LinkedSignal {
  readonly signal: AbortSignal;
  unlink(): void;
}

export function linkedSignal(a: AbortSignal, b: AbortSignal): LinkedSignal {
  const controller = new AbortController();
  const first = a.aborted ? a : b.aborted ? b : undefined;
  if (first) {
    controller.abort(first.reason);
    return { signal: controller.signal, unlink: () => {} };
  }
  const fromA = () => controller.abort(a.reason);
  const fromB = () => controller.abort(b.reason);
  const unlink = () => {
    a.removeEventListener('abort', fromA);
    b.removeEventListener('abort', fromB);
  };
  a.addEventListener('abort', fromA, { once: true });
  b.addEventListener('abort', fromB, { once: true });
  // Either abort ends the link: the other source no longer needs to reach this signal.
  controller.signal.addEventListener('abort', unlink, { once: true });
  return { signal: controller.signal, unlink };
}
