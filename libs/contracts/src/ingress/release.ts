/**
 * `release`: the lease holder gives back a lease it has not started (R-LSE-5); answered with the ended lease.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * 0a84583 (2026-12-01); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                                        | appeared           | wire |
 * | ------------------------------------------------------------ | ------------------ | ---- |
 * | request: the lease fence                                     | 0a84583 2026-12-01 | v1   |
 * | answer `lease` (the projection)                              | 0a84583 2026-12-01 | v1   |
 */
import { LeaseFenceRequest } from './lease-fence';
import { leaseFenceCall } from './lease-answer';

const release = leaseFenceCall('release');
export const RELEASE = release.call;
/** `release` carries the lease fence alone. */
export type ReleaseRequest = LeaseFenceRequest;
export const buildReleaseRequest = release.build;
export const parseReleaseRequest = release.parseRequest;
export const parseReleaseAnswer = release.parseAnswer;
