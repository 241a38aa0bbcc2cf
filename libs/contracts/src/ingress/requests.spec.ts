import {
  INGRESS_ACTIONS,
  INGRESS_CERTIFICATE_ACTION,
  INGRESS_MAX_BODY,
  ingressBodyLimit,
} from '../ingress-wire';
import { INGRESS_CALLS, buildLeaseCallRequest } from './requests';

const KiB = 1024;

describe('every ingress call has its contract (ingress/requests.ts)', () => {
  it('one descriptor per action, enrollment and rotation included, named as its action', () => {
    expect(Object.keys(INGRESS_CALLS).sort()).toEqual(
      [...INGRESS_ACTIONS, 'enroll', INGRESS_CERTIFICATE_ACTION].sort(),
    );
    for (const [action, call] of Object.entries(INGRESS_CALLS)) expect(call.action).toBe(action);
  });

  it('the body limits are the calls’ own, as they always were; anything else gets 4 KiB', () => {
    const limits = Object.fromEntries(
      [...Object.keys(INGRESS_CALLS), '任务', 'toString'].map((a) => [a, ingressBodyLimit(a) / KiB]),
    );
    expect(limits).toEqual({
      register: 20,
      heartbeat: 4,
      drain: 4,
      offline: 4,
      offers: 4,
      renew: 4,
      release: 4,
      starting: 4,
      running: 4,
      'start-failure': 4,
      completion: 68,
      logs: 64,
      secrets: 4,
      bundle: 4,
      enroll: 16,
      certificate: 16,
      任务: 4,
      toString: 4,
    });
    expect(Math.max(...Object.values(INGRESS_CALLS).map((c) => c.bodyLimit))).toBe(INGRESS_MAX_BODY);
  });

  it('builds a lease call’s body from the session fence of its turn and the call’s own fields', () => {
    const lease = {
      offerId: '01938e1e-0000-7000-8000-00000000f501',
      leaseToken: 'Rr'.repeat(22),
      leaseGeneration: 1,
      leaseVersion: 3,
    };
    const body = buildLeaseCallRequest(
      'running',
      { generation: 4, expectedVersion: 8 },
      { ...lease, executorHandle: 'pid:9' },
    );
    expect(Object.keys(body)).toEqual([
      'generation',
      'expectedVersion',
      'offerId',
      'leaseToken',
      'leaseGeneration',
      'leaseVersion',
      'executorHandle',
    ]);
    const pull = buildLeaseCallRequest(
      'offers',
      { generation: 4, expectedVersion: 8 },
      { offerId: lease.offerId, leaseToken: lease.leaseToken, waitMs: 15_000 },
    );
    expect(pull).toEqual({
      generation: 4,
      expectedVersion: 8,
      offerId: lease.offerId,
      leaseToken: lease.leaseToken,
      waitMs: 15_000,
    });
  });
});
