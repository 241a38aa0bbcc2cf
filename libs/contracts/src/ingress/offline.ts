/**
 * `offline`: the session ends (R-WRK-5); answered with the session.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from):
 *
 * | field                                   | appeared           | wire |
 * | --------------------------------------- | ------------------ | ---- |
 * | request `generation`, `expectedVersion` | e7d9752 2026-12-01 | v1   |
 * | answer: the session projection          | e7d9752 2026-12-01 | v1   |
 */
import { SessionFenceRequest, fenceOnlyCall } from './session';

const offline = fenceOnlyCall('offline');
export const OFFLINE = offline.call;
/** `offline` carries only the session fence. */
export type OfflineRequest = SessionFenceRequest;
export const buildOfflineRequest = offline.build;
export const parseOfflineRequest = offline.parseRequest;
export const parseOfflineAnswer = offline.parseAnswer;
