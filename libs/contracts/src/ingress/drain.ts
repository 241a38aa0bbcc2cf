/**
 * `drain`: the session takes no new runs; the ones it holds go on (R-WRK-5); answered with the session.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from):
 *
 * | field                                   | appeared           | wire |
 * | --------------------------------------- | ------------------ | ---- |
 * | request `generation`, `expectedVersion` | e7d9752 2026-12-01 | v1   |
 * | answer: the session projection          | e7d9752 2026-12-01 | v1   |
 */
import { SessionFenceRequest, fenceOnlyCall } from './session';

const drain = fenceOnlyCall('drain');
export const DRAIN = drain.call;
/** `drain` carries only the session fence. */
export type DrainRequest = SessionFenceRequest;
export const buildDrainRequest = drain.build;
export const parseDrainRequest = drain.parseRequest;
export const parseDrainAnswer = drain.parseAnswer;
