/**
 * The worker's entry (`npm run start:worker`, `… main.js journal list|resolve`; worker-main.ts is the
 * worker). Nest is loaded with its never-used logger date formatters deferred, as the control plane
 * loads it (ADR 0024): building them would load ICU's locale and time-zone data, ~6.5 MiB of an idle
 * worker's RSS (ADR 0048). Only `@ql/contracts` (no Nest) is loaded before.
 */
import { withDeferredDateTimeFormats } from '@ql/contracts';

// eslint-disable-next-line @typescript-eslint/no-require-imports
withDeferredDateTimeFormats(() => require('./worker-main'));
