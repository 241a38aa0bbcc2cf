/** The ingress contract's wire versions and the protocol versions they are registered under. */

/**
 * A wire version of the ingress contract (ADR 0056). v1 is each call as it was first released (the
 * commit where both sides first spoke it, `firstReleased`), whenever that was; v2 adds every field,
 * enum value and refusal that appeared since. A published version never changes.
 */
export const WIRE_VERSIONS = [1, 2] as const;
export type WireVersion = (typeof WIRE_VERSIONS)[number];

/**
 * The registration's `protocolVersion` each wire version is spoken under (ADR 0056, ADR 0060). Every
 * worker released before negotiation registers 3, v1 worker and current worker alike: so 3 means v1,
 * and a worker that speaks v2 says 4. The session keeps the version it registered with: that is the
 * negotiated one (ADR 0060 §1).
 */
export const PROTOCOL_VERSION_OF_WIRE: Readonly<Record<WireVersion, number>> = { 1: 3, 2: 4 };

/** The wire version a registered `protocolVersion` stands for (undefined: none this repository speaks). */
export function wireVersionOf(protocolVersion: number): WireVersion | undefined {
  return WIRE_VERSIONS.find((v) => PROTOCOL_VERSION_OF_WIRE[v] === protocolVersion);
}
