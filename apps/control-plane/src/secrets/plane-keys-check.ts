import type { PlaneSecretKeyRepository, PlaneSecretKeys, SecretCipher } from '@ql/domain';

/** The stable code of the CLI's refusal (issue 29 item 5, ADR 0050). */
export const KEY_NOT_ON_CONTROL_PLANE = 'key_not_on_control_plane';

/**
 * Why `secret set` or `secret rotate` must not write, or undefined: every running control plane holds
 * the key the CLI would seal with (same id, same check value). A value under a key a running plane
 * lacks would fail every run that maps it (`secrets_unavailable`) until that plane restarts.
 */
export async function planeKeysRefusal(
  planes: Pick<PlaneSecretKeyRepository, 'live'>,
  cipher: SecretCipher | undefined,
  action: 'set' | 'rotate',
): Promise<string | undefined> {
  if (!cipher) return undefined; // the command refuses by itself: no key here
  const id = cipher.currentKeyId;
  const check = cipher.keyChecks()[id];
  const lacking = (await planes.live()).filter((p) => p.keys[id] !== check);
  if (lacking.length === 0) return undefined;
  const which = lacking.map((p) => `${p.process}: ${holds(p, id)}`).join('; ');
  const step =
    action === 'set'
      ? `restart it with this QL_SECRETS_KEY and QL_SECRETS_KEY_ID=${id} first`
      : `restart it with the new QL_SECRETS_KEY and QL_SECRETS_KEY_ID=${id}, the old key in QL_SECRETS_PREVIOUS_KEYS, first; then rotate`;
  return (
    `${KEY_NOT_ON_CONTROL_PLANE}: a running control plane cannot open values under key ${id} (${which}). ` +
    `Nothing was written: ${step} (README, "Secrets")`
  );
}

function holds(plane: PlaneSecretKeys, id: string): string {
  const ids = Object.keys(plane.keys);
  if (ids.length === 0) return 'it has no QL_SECRETS_KEY';
  if (ids.includes(id)) return `its key ${id} is another key`;
  return `it holds key${ids.length === 1 ? '' : 's'} ${ids.join(', ')}`;
}
