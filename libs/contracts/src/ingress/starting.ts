/**
 * `starting` (R-ACT-1): the lease holder is about to launch the attempt; answered
 * `qinglong/remote-run-activation@v1` (with the deadline the worker enforces, ADR 0028).
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * ba93662 (2026-12-02); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                   | appeared           | wire |
 * | --------------------------------------- | ------------------ | ---- |
 * | request: the lease fence                | ba93662 2026-12-02 | v1   |
 * | answer: see `activation-answer.ts`      | 7985e66 2026-12-01 | v1   |
 * | answer `snapshot.deadlineGraceMs`       | f9de650 2026-12-04 | v2   |
 */
import { activationCall } from './activation-call';
import { LeaseFenceRequest, buildLeaseFence, parseLeaseFence } from './lease-fence';

export const STARTING = activationCall('starting');

/** `starting` carries the lease fence alone. */
export type StartingRequest = LeaseFenceRequest;
/** The worker's `starting` body in wire order. */
export const buildStartingRequest = buildLeaseFence;
/** The control plane's reader of a `starting` body (behind the DTO, ADR 0009). */
export const parseStartingRequest = parseLeaseFence;
/** The answer: `parseActivationResponse` (activation-answer.ts). */
export { parseActivationResponse as parseStartingAnswer } from './activation-answer';
