// Size: the placement spec (R-PLC-1) is one reader, one matcher and one explanation over the same
// rules; split, each would re-export the others' types.
import satisfies from 'semver/functions/satisfies';
import validRange from 'semver/ranges/valid';
import {
  CAPABILITY_LIMITS,
  Capabilities,
  LABEL_KEY_PATTERN,
  TOKEN_PATTERN,
  readLabels,
} from './capabilities';
import { ValidationError } from './errors';
import { WIRE_VERSIONS, WireVersion } from './wire-versions';
import {
  compareCodeUnits,
  readArray,
  readInt,
  readObject,
  readString,
  readStringSet,
  sortedUnique,
} from './strict';

/** SPEC R-PLC-1 limits for one placement spec. */
export const PLACEMENT_LIMITS = {
  architectures: 8,
  operatingSystems: 8,
  executors: 8,
  runtimes: 16,
  labels: 32,
  gpuFeatures: 32,
  preferred: 16,
  rangeLength: 64,
  maxWeight: 100,
} as const;

export interface RuntimeRequirement {
  readonly name: string;
  readonly range: string;
}
export interface PreferredLabel {
  readonly key: string;
  readonly value: string;
  readonly weight: number;
}
export interface GpuRequirement {
  readonly vendor: string;
  readonly features: readonly string[];
}
/** A placement spec in canonical form: every optional field present, every set sorted. */
export interface PlacementSpec {
  readonly required: {
    /** Any-of; [] = any. */
    readonly architectures: readonly string[];
    /** Any-of; [] = any. */
    readonly operatingSystems: readonly string[];
    /** All-of: the worker must have every one. */
    readonly executors: readonly string[];
    /** All-of: each needs a worker runtime of the same name whose version satisfies the range. */
    readonly runtimes: readonly RuntimeRequirement[];
    /** All must be present with exactly this value. */
    readonly labels: Readonly<Record<string, string>>;
    readonly minMemoryMiB: number;
    readonly minDiskMiB: number;
    /** Some worker GPU of this vendor having every feature. */
    readonly gpu: GpuRequirement | null;
    /**
     * A semver range the worker's software version must satisfy (a task waits for upgraded workers);
     * absent = any. Drives placement only: never offered to a worker (`offerSpecFor`).
     */
    readonly workerVersion?: string;
    /**
     * The lowest wire version (ADR 0056) the worker's session must speak; absent = 1. A run whose spec
     * needs v2 (`secretEnv`, `bundle`) gets 2 when it is created (ADR 0062). Never offered.
     */
    readonly wireVersion?: number;
  };
  readonly preferred: readonly PreferredLabel[];
}

const SPEC_FIELDS = ['required', 'preferred'] as const;
const REQUIRED_FIELDS = [
  'architectures',
  'operatingSystems',
  'executors',
  'runtimes',
  'labels',
  'minMemoryMiB',
  'minDiskMiB',
  'gpu',
  'workerVersion',
  'wireVersion',
] as const;

export const EMPTY_PLACEMENT: PlacementSpec = Object.freeze({
  required: Object.freeze({
    architectures: Object.freeze([]),
    operatingSystems: Object.freeze([]),
    executors: Object.freeze([]),
    runtimes: Object.freeze([]),
    labels: Object.freeze({}),
    minMemoryMiB: 0,
    minDiskMiB: 0,
    gpu: null,
  }),
  preferred: Object.freeze([]),
});

const token = (v: unknown, field: string) =>
  readString(v, field, { max: CAPABILITY_LIMITS.tokenLength, pattern: TOKEN_PATTERN });
const tokenSet = (v: unknown, field: string, maxItems: number) =>
  readStringSet(v, field, { maxItems, max: CAPABILITY_LIMITS.tokenLength, pattern: TOKEN_PATTERN });
const labelKey = (v: unknown, field: string) =>
  readString(v, field, { max: CAPABILITY_LIMITS.labelKeyLength, pattern: LABEL_KEY_PATTERN });
const labelValue = (v: unknown, field: string) =>
  readString(v, field, { max: CAPABILITY_LIMITS.labelValueLength, min: 0 });
const mebibytes = (v: unknown, field: string) =>
  v === undefined ? 0 : readInt(v, field, 0, CAPABILITY_LIMITS.mebibytes);

/**
 * Strict parse into canonical form (R-PLC-1): unknown fields are rejected, sets are sorted and a
 * duplicate is an error. `undefined` is the empty spec, which every worker satisfies.
 */
export function parsePlacementSpec(input: unknown, field = 'placement'): PlacementSpec {
  if (input === undefined) return EMPTY_PLACEMENT;
  const raw = readObject(input, field, SPEC_FIELDS);
  return {
    required: readRequired(raw.required ?? {}, `${field}.required`),
    preferred: readPreferred(raw.preferred ?? [], `${field}.preferred`),
  };
}

function readRequired(value: unknown, field: string): PlacementSpec['required'] {
  const raw = readObject(value, field, REQUIRED_FIELDS);
  return {
    architectures: tokenSet(
      raw.architectures ?? [],
      `${field}.architectures`,
      PLACEMENT_LIMITS.architectures,
    ),
    operatingSystems: tokenSet(
      raw.operatingSystems ?? [],
      `${field}.operatingSystems`,
      PLACEMENT_LIMITS.operatingSystems,
    ),
    executors: tokenSet(raw.executors ?? [], `${field}.executors`, PLACEMENT_LIMITS.executors),
    runtimes: readRuntimes(raw.runtimes ?? [], `${field}.runtimes`),
    labels: readLabels(raw.labels ?? {}, `${field}.labels`),
    minMemoryMiB: mebibytes(raw.minMemoryMiB, `${field}.minMemoryMiB`),
    minDiskMiB: mebibytes(raw.minDiskMiB, `${field}.minDiskMiB`),
    gpu: readGpu(raw.gpu ?? null, `${field}.gpu`),
    ...readVersions(raw, field),
  };
}

/** `workerVersion` and `wireVersion`, each only when it constrains (canonical form omits the default). */
function readVersions(raw: Record<string, unknown>, field: string) {
  const versions: { workerVersion?: string; wireVersion?: number } = {};
  if (raw.workerVersion !== undefined && raw.workerVersion !== null)
    versions.workerVersion = semverRange(raw.workerVersion, `${field}.workerVersion`);
  if (raw.wireVersion !== undefined && raw.wireVersion !== null) {
    const wire = readInt(raw.wireVersion, `${field}.wireVersion`, WIRE_VERSIONS[0], WIRE_VERSIONS.at(-1)!);
    if (wire > 1) versions.wireVersion = wire;
  }
  return versions;
}

/** A semver range as written, with no leading, trailing or blank-only text. */
function semverRange(value: unknown, field: string): string {
  // semver reads ' ' as '*', and two spellings of one requirement would give one task two digests.
  const range = readString(value, field, { max: PLACEMENT_LIMITS.rangeLength, pattern: /^\S(.*\S)?$/ });
  if (validRange(range) === null) throw new ValidationError(field, 'invalid_semver_range');
  return range;
}

function readRuntimes(value: unknown, field: string): RuntimeRequirement[] {
  const runtimes = readArray(value, field, PLACEMENT_LIMITS.runtimes).map((item, i) => {
    const r = readObject(item, `${field}[${i}]`, ['name', 'range']);
    const name = token(r.name, `${field}[${i}].name`);
    return { name, range: semverRange(r.range, `${field}[${i}].range`) };
  });
  runtimes.sort(compareRuntimes);
  // One requirement per runtime name: two ranges for one name would be one intersected range.
  for (let i = 1; i < runtimes.length; i++) {
    if (runtimes[i]!.name === runtimes[i - 1]!.name) throw new ValidationError(field, 'duplicate_item');
  }
  return runtimes;
}

function readGpu(value: unknown, field: string): GpuRequirement | null {
  if (value === null) return null;
  const g = readObject(value, field, ['vendor', 'features']);
  return {
    vendor: token(g.vendor, `${field}.vendor`),
    features: tokenSet(g.features ?? [], `${field}.features`, PLACEMENT_LIMITS.gpuFeatures),
  };
}

function readPreferred(value: unknown, field: string): PreferredLabel[] {
  const preferred = readArray(value, field, PLACEMENT_LIMITS.preferred).map((item, i) => {
    const p = readObject(item, `${field}[${i}]`, ['key', 'value', 'weight']);
    return {
      key: labelKey(p.key, `${field}[${i}].key`),
      value: labelValue(p.value, `${field}[${i}].value`),
      weight: readInt(p.weight, `${field}[${i}].weight`, 1, PLACEMENT_LIMITS.maxWeight),
    };
  });
  preferred.sort((a, b) => compareCodeUnits(a.key, b.key) || compareCodeUnits(a.value, b.value));
  for (let i = 1; i < preferred.length; i++) {
    const [a, b] = [preferred[i - 1]!, preferred[i]!];
    if (a.key === b.key && a.value === b.value) throw new ValidationError(field, 'duplicate_item');
  }
  return preferred;
}

function compareRuntimes(a: RuntimeRequirement, b: RuntimeRequirement): number {
  return compareCodeUnits(a.name, b.name) || compareCodeUnits(a.range, b.range);
}

/**
 * Adds what the task itself implies (normalised once per run): its executor, and its interpreter
 * (any version) unless the spec already constrains that runtime. Returns canonical form.
 */
export function withTaskRequirements(
  spec: PlacementSpec,
  executor: string,
  runtime: 'shell' | 'node' | 'python',
): PlacementSpec {
  const executors = spec.required.executors.includes(executor)
    ? spec.required.executors
    : sortedUnique([...spec.required.executors, executor], 'executors');
  const runtimes =
    runtime === 'shell' || spec.required.runtimes.some((r) => r.name === runtime)
      ? spec.required.runtimes
      : [...spec.required.runtimes, { name: runtime, range: '*' }].sort(compareRuntimes);
  return { required: { ...spec.required, executors, runtimes }, preferred: spec.preferred };
}

/** Why a worker cannot take a run. Values are wire codes: never rename one. */
export const PLACEMENT_REASONS = [
  'architecture',
  'os',
  'executor',
  'runtime',
  'label',
  'memory',
  'disk',
  'gpu',
  'capacity',
  'draining',
  'expired',
  'worker_version',
  'wire_version',
] as const;
export type PlacementReason = (typeof PLACEMENT_REASONS)[number];

/** What placement reads of a worker's current session beside its capabilities (ADR 0062). */
export interface WorkerSoftware {
  /** As the worker registered it (semver for this repository's workers). */
  readonly softwareVersion: string;
  /** The wire version of the session's protocol version (ADR 0060). */
  readonly wireVersion: WireVersion;
}

/**
 * Adds the wire version the run's spec needs (ADR 0062): 2 when it maps secrets or names a bundle,
 * which a v1 session cannot be offered. Canonical form (1 is left out).
 */
export function withWireRequirement(spec: PlacementSpec, wireVersion: number): PlacementSpec {
  if (wireVersion <= (spec.required.wireVersion ?? 1)) return spec;
  return { required: { ...spec.required, wireVersion }, preferred: spec.preferred };
}
export type CapabilityMismatch = Exclude<PlacementReason, 'capacity' | 'draining' | 'expired'>;

/** The worker has label `key` with exactly `value` (own keys only). */
export const hasLabel = (labels: Readonly<Record<string, string>>, key: string, value: string) =>
  Object.hasOwn(labels, key) && labels[key] === value;

/** The keys of the task's required labels the worker lacks (or has with another value), in spec order. */
export function missingLabels(spec: PlacementSpec, capabilities: Capabilities): string[] {
  return Object.entries(spec.required.labels)
    .filter(([k, v]) => !hasLabel(capabilities.labels, k, v))
    .map(([k]) => k);
}

/** R-PLC-2: the first required rule the capabilities break, in a fixed order; null when all hold. */
export function capabilityMismatch(
  spec: PlacementSpec,
  capabilities: Capabilities,
  software: WorkerSoftware,
): CapabilityMismatch | null {
  const req = spec.required;
  if (software.wireVersion < (req.wireVersion ?? 1)) return 'wire_version';
  if (
    req.workerVersion !== undefined &&
    !satisfies(software.softwareVersion, req.workerVersion, { includePrerelease: true })
  )
    return 'worker_version';
  if (req.architectures.length > 0 && !req.architectures.includes(capabilities.architecture))
    return 'architecture';
  if (req.operatingSystems.length > 0 && !req.operatingSystems.includes(capabilities.operatingSystem))
    return 'os';
  if (!req.executors.every((e) => capabilities.executors.includes(e))) return 'executor';
  const runtimeHolds = (r: RuntimeRequirement) =>
    capabilities.runtimes.some(
      (c) => c.name === r.name && satisfies(c.version, r.range, { includePrerelease: false }),
    );
  if (!req.runtimes.every(runtimeHolds)) return 'runtime';
  if (!Object.entries(req.labels).every(([k, v]) => hasLabel(capabilities.labels, k, v))) return 'label';
  if (capabilities.memoryMiB < req.minMemoryMiB) return 'memory';
  if (capabilities.diskMiB < req.minDiskMiB) return 'disk';
  const gpu = req.gpu;
  if (
    gpu &&
    !capabilities.gpus.some(
      (g) => g.vendor === gpu.vendor && gpu.features.every((f) => g.features.includes(f)),
    )
  )
    return 'gpu';
  return null;
}

/** R-PLC-3: the sum of the weights of the preferred labels the worker has with the exact value. */
export function placementScore(spec: PlacementSpec, capabilities: Capabilities): number {
  let score = 0;
  for (const p of spec.preferred) if (hasLabel(capabilities.labels, p.key, p.value)) score += p.weight;
  return score;
}

/** One worker's current session as the placement query sees it. Times are epoch milliseconds. */
export interface PlacementCandidate {
  readonly workerId: string;
  readonly capabilities: Capabilities;
  readonly software: WorkerSoftware;
  readonly status: 'online' | 'draining' | 'offline';
  readonly disabled: boolean;
  readonly leaseExpiresAt: number;
  readonly availableSlots: number;
  readonly maxConcurrentRuns: number;
  readonly activeLeases: number;
}

/** Why this worker cannot take the run now, or null. Liveness first, then capabilities, then capacity. */
export function candidateRejection(
  spec: PlacementSpec,
  candidate: PlacementCandidate,
  now: number,
): PlacementReason | null {
  if (candidate.status === 'offline' || candidate.disabled || candidate.leaseExpiresAt <= now)
    return 'expired';
  if (candidate.status === 'draining') return 'draining';
  const mismatch = capabilityMismatch(spec, candidate.capabilities, candidate.software);
  if (mismatch) return mismatch;
  if (candidate.activeLeases >= Math.min(candidate.maxConcurrentRuns, candidate.availableSlots))
    return 'capacity';
  return null;
}

/** How many ranked candidates one placement attempt looks at. */
export const CANDIDATE_PAGE = 64;

/**
 * Accepted candidates, best first: score desc, availableSlots desc, workerId asc. The order is total
 * over what is returned, so the result does not depend on the input order.
 */
export function rankCandidates(
  spec: PlacementSpec,
  candidates: readonly PlacementCandidate[],
  now: number,
): { workerId: string; score: number }[] {
  return candidates
    .filter((c) => candidateRejection(spec, c, now) === null)
    .map((c) => ({
      workerId: c.workerId,
      score: placementScore(spec, c.capabilities),
      slots: c.availableSlots,
    }))
    .sort((a, b) => b.score - a.score || b.slots - a.slots || compareCodeUnits(a.workerId, b.workerId))
    .slice(0, CANDIDATE_PAGE)
    .map(({ workerId, score }) => ({ workerId, score }));
}

export interface PlacementExplanation {
  readonly considered: number;
  readonly matching: number;
  /** Every reason is present (0 when no candidate was rejected for it). */
  readonly reasons: Readonly<Record<PlacementReason, number>>;
  /**
   * For the candidates refused for `label`: how many lack each of the task's required label keys
   * (keys from the task's own spec, never a worker's label); only keys some candidate lacks.
   */
  readonly missingLabels: Readonly<Record<string, number>>;
}

/** Why a run is not placed: how many candidates were rejected for each reason. */
export function explainPlacement(
  spec: PlacementSpec,
  candidates: readonly PlacementCandidate[],
  now: number,
): PlacementExplanation {
  const reasons = Object.fromEntries(PLACEMENT_REASONS.map((r) => [r, 0])) as Record<PlacementReason, number>;
  const labels = new Map<string, number>();
  let matching = 0;
  for (const c of candidates) {
    const reason = candidateRejection(spec, c, now);
    if (reason === null) matching++;
    else reasons[reason]++;
    if (reason === 'label')
      for (const key of missingLabels(spec, c.capabilities)) labels.set(key, (labels.get(key) ?? 0) + 1);
  }
  return { considered: candidates.length, matching, reasons, missingLabels: Object.fromEntries(labels) };
}
