/**
 * `renew`: the lease holder extends its lease (R-LSE-4); answered with the lease and whether its run has a cancel request (R-RUN-5).
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * 0a84583 (2026-12-01); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                                        | appeared           | wire |
 * | ------------------------------------------------------------ | ------------------ | ---- |
 * | request: the lease fence                                     | 0a84583 2026-12-01 | v1   |
 * | answer `lease` (the projection)                              | 0a84583 2026-12-01 | v1   |
 * | answer `cancelRequested` (R-RUN-5)                           | bb721f9 2026-12-02 | v1   |
 */
import { LeaseFenceRequest } from './lease-fence';
import { leaseFenceCall } from './lease-answer';

const renew = leaseFenceCall('renew');
export const RENEW = renew.call;
/** `renew` carries the lease fence alone. */
export type RenewRequest = LeaseFenceRequest;
export const buildRenewRequest = renew.build;
export const parseRenewRequest = renew.parseRequest;
export const parseRenewAnswer = renew.parseAnswer;
