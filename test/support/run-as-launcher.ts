import { RUN_AS_CAPABILITIES } from '../../apps/worker/src/executor/run-as';
import { ROOT } from './entry-points';

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

/**
 * A launcher for a worker that starts as another, non-root user (`setpriv --reuid=…`): in the worker's
 * own mount namespace the checkout is bound onto `view`, a folder that user can reach, and node runs from
 * there — so the test does not depend on the folders above the checkout being open to everyone (a clone
 * in /root, or in a 0700 `mktemp -d`, is not). unshare and sh exec in place: the worker keeps the pid.
 */
export function fromReachableCheckout(view: string, setpriv: readonly string[]): string[] {
  const script = 'root=$0; view=$1; shift; mount --bind "$root" "$view" && cd "$view" && exec "$@"';
  return ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', script, ROOT, view, ...setpriv];
}
