import validSemver from 'semver/functions/valid';
import { canonicalJson, sha256Hex, utf8Length } from './canonical-json';
import { ValidationError } from './errors';
import {
  compareCodeUnits,
  readArray,
  readInt,
  readObject,
  readRecord,
  readString,
  readStringSet,
} from './strict';

/** SPEC §12 limits for one capabilities document. */
export const CAPABILITY_LIMITS = {
  canonicalBytes: 16 * 1024,
  executors: 8,
  runtimes: 16,
  labels: 32,
  gpus: 8,
  features: 32,
  labelKeyLength: 63,
  labelValueLength: 128,
  tokenLength: 64,
  modelLength: 128,
  versionLength: 64,
  mebibytes: 1 << 30,
} as const;

export const TOKEN_PATTERN = /^[a-z0-9][a-z0-9._+-]*$/;
export const LABEL_KEY_PATTERN = /^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?$/;

export interface RuntimeCapability {
  readonly name: string;
  readonly version: string;
}
export interface GpuCapability {
  readonly vendor: string;
  readonly model: string;
  readonly memoryMiB: number;
  readonly features: readonly string[];
}
/** Capabilities in canonical form: every set sorted, every optional field present. */
export interface Capabilities {
  readonly architecture: string;
  readonly operatingSystem: string;
  readonly executors: readonly string[];
  readonly runtimes: readonly RuntimeCapability[];
  readonly labels: Readonly<Record<string, string>>;
  readonly memoryMiB: number;
  readonly diskMiB: number;
  readonly gpus: readonly GpuCapability[];
  readonly features: readonly string[];
}
export interface CanonicalCapabilities {
  readonly capabilities: Capabilities;
  readonly canonical: string;
  readonly digest: string;
}

const FIELDS = [
  'architecture',
  'operatingSystem',
  'executors',
  'runtimes',
  'labels',
  'memoryMiB',
  'diskMiB',
  'gpus',
  'features',
] as const;

const token = (v: unknown, field: string) =>
  readString(v, field, { max: CAPABILITY_LIMITS.tokenLength, pattern: TOKEN_PATTERN });
const tokenSet = (v: unknown, field: string, maxItems: number) =>
  readStringSet(v, field, { maxItems, max: CAPABILITY_LIMITS.tokenLength, pattern: TOKEN_PATTERN });

/**
 * The one function that validates capabilities and produces their canonical JSON and SHA-256 digest
 * (R-REG-2). Sets are sorted; a duplicate in a set is an error. GPUs form a list (two identical
 * cards are legitimate) sorted by their canonical JSON.
 */
export function canonicalizeCapabilities(input: unknown, field = 'capabilities'): CanonicalCapabilities {
  const raw = readObject(input, field, FIELDS);
  const capabilities: Capabilities = {
    architecture: token(raw.architecture, `${field}.architecture`),
    operatingSystem: token(raw.operatingSystem, `${field}.operatingSystem`),
    executors: tokenSet(raw.executors, `${field}.executors`, CAPABILITY_LIMITS.executors),
    runtimes: readRuntimes(raw.runtimes, `${field}.runtimes`),
    labels: readLabels(raw.labels ?? {}, `${field}.labels`),
    memoryMiB: readInt(raw.memoryMiB, `${field}.memoryMiB`, 0, CAPABILITY_LIMITS.mebibytes),
    diskMiB: readInt(raw.diskMiB, `${field}.diskMiB`, 0, CAPABILITY_LIMITS.mebibytes),
    gpus: readGpus(raw.gpus ?? [], `${field}.gpus`),
    features: tokenSet(raw.features ?? [], `${field}.features`, CAPABILITY_LIMITS.features),
  };
  const canonical = canonicalJson(capabilities);
  if (utf8Length(canonical) > CAPABILITY_LIMITS.canonicalBytes) throw new ValidationError(field, 'too_large');
  return { capabilities, canonical, digest: sha256Hex(canonical) };
}

function readRuntimes(value: unknown, field: string): RuntimeCapability[] {
  const runtimes = readArray(value, field, CAPABILITY_LIMITS.runtimes).map((item, i) => {
    const r = readObject(item, `${field}[${i}]`, ['name', 'version']);
    const name = token(r.name, `${field}[${i}].name`);
    const version = readString(r.version, `${field}[${i}].version`, {
      max: CAPABILITY_LIMITS.versionLength,
    });
    if (validSemver(version) !== version)
      throw new ValidationError(`${field}[${i}].version`, 'invalid_semver');
    return { name, version };
  });
  runtimes.sort((a, b) => compareCodeUnits(a.name, b.name) || compareCodeUnits(a.version, b.version));
  for (let i = 1; i < runtimes.length; i++) {
    if (runtimes[i]!.name === runtimes[i - 1]!.name && runtimes[i]!.version === runtimes[i - 1]!.version) {
      throw new ValidationError(field, 'duplicate_item');
    }
  }
  return runtimes;
}

/** Labels `{k: v}`: keys by LABEL_KEY_PATTERN, values ≤ 128 (may be empty), ≤ 32 of them; sorted. */
export function readLabels(value: unknown, field: string): Record<string, string> {
  const raw = readRecord(value, field);
  const keys = Object.keys(raw);
  if (keys.length > CAPABILITY_LIMITS.labels) throw new ValidationError(field, 'too_many_items');
  const labels: Record<string, string> = {};
  for (const key of keys.sort(compareCodeUnits)) {
    readString(key, `${field}.<key>`, { max: CAPABILITY_LIMITS.labelKeyLength, pattern: LABEL_KEY_PATTERN });
    labels[key] = readString(raw[key], `${field}.${key}`, {
      max: CAPABILITY_LIMITS.labelValueLength,
      min: 0,
    });
  }
  return labels;
}

function readGpus(value: unknown, field: string): GpuCapability[] {
  const gpus = readArray(value, field, CAPABILITY_LIMITS.gpus).map((item, i) => {
    const g = readObject(item, `${field}[${i}]`, ['vendor', 'model', 'memoryMiB', 'features']);
    return {
      vendor: token(g.vendor, `${field}[${i}].vendor`),
      model: readString(g.model, `${field}[${i}].model`, { max: CAPABILITY_LIMITS.modelLength }),
      memoryMiB: readInt(g.memoryMiB, `${field}[${i}].memoryMiB`, 0, CAPABILITY_LIMITS.mebibytes),
      features: tokenSet(g.features ?? [], `${field}[${i}].features`, CAPABILITY_LIMITS.features),
    };
  });
  return gpus
    .map((gpu) => ({ gpu, key: canonicalJson(gpu) }))
    .sort((a, b) => compareCodeUnits(a.key, b.key))
    .map(({ gpu }) => gpu);
}
