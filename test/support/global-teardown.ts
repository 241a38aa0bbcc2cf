/** jest globalTeardown: drops this run's template and stops the embedded server if one was started. */
import { HARNESS_STATE_KEY, dropDatabase, type HarnessState } from './global-setup';

export default async function globalTeardown(): Promise<void> {
  const globals = globalThis as Record<string, unknown>;
  const state = globals[HARNESS_STATE_KEY] as HarnessState | undefined;
  if (!state) return;
  delete globals[HARNESS_STATE_KEY];
  try {
    // An embedded server goes away with its data; only a shared server needs the cleanup.
    if (state.template && state.server.kind !== 'embedded') {
      await dropDatabase(state.server.adminUrl, state.template).catch((error: unknown) =>
        console.warn(`[test harness] could not drop template ${state.template}: ${String(error)}`),
      );
    }
  } finally {
    await state.server.stop();
  }
}
