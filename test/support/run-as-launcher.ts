import { RUN_AS_CAPABILITIES } from '../../apps/worker/src/executor/run-as';

/**
 * A launcher (`RemoteRunHarness.startWorker({ launcher })`) giving a root worker the deployments'
 * capability set only, nothing inherited (test/deploy/task-user.spec.ts checks each file): `setpriv`
 * stands in for Docker's cap_drop/cap_add, systemd's CapabilityBoundingSet and Kubernetes' securityContext.
 */
export const DEPLOYED_CAPS: readonly string[] = [
  'setpriv',
  `--bounding-set=-all,${RUN_AS_CAPABILITIES.map((c) => `+${c.toLowerCase()}`).join(',')}`,
  '--inh-caps=-all',
  '--ambient-caps=-all',
  '--',
];
