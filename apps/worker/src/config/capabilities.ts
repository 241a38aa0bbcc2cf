import { execFile } from 'node:child_process';
import { statfs } from 'node:fs/promises';
import * as os from 'node:os';
import { canonicalizeCapabilities, CanonicalCapabilities, RuntimeCapability } from '@ql/domain';

const MiB = 1024 * 1024;
/** The only executor the worker ships (R-WRK-3). */
export const WORKER_EXECUTORS = ['local-process'] as const;

/** What the host looks like; a port so tests can describe any machine. */
export interface HostProbe {
  arch(): string;
  platform(): string;
  totalMemoryBytes(): number;
  /** Bytes available to this process in the folder runs work in; 0 when unknown. */
  freeDiskBytes(): Promise<number>;
  nodeVersion(): string;
  /** `python3 --version` output, or null when python3 is missing or slow to answer. */
  python3VersionOutput(): Promise<string | null>;
}

/**
 * How long `python3 --version` may take at start. A python3 slower than this is left out of the
 * registered runtimes, so python tasks are never placed on this worker: 2 s did that to a worker on a
 * loaded machine (python3 took 3 s to start there), and a router's flash can be as slow.
 */
export const PYTHON_PROBE_TIMEOUT_MS = 15_000;

export const systemHostProbe: HostProbe = {
  arch: () => os.arch(),
  platform: () => os.platform(),
  totalMemoryBytes: () => os.totalmem(),
  freeDiskBytes: async () => {
    try {
      const s = await statfs(process.cwd());
      return s.bavail * s.bsize;
    } catch {
      return 0;
    }
  },
  nodeVersion: () => process.versions.node,
  python3VersionOutput: () =>
    new Promise((resolve) => {
      // One short-lived child at start only; never from a constructor (R-PROF-3).
      execFile(
        'python3',
        ['--version'],
        { timeout: PYTHON_PROBE_TIMEOUT_MS, windowsHide: true, env: process.env },
        (error, stdout, stderr) => {
          resolve(error ? null : `${stdout}${stderr}`.trim());
        },
      );
    }),
};

/** `3.11.7` from `Python 3.11.7`; pre-release suffixes are dropped so the version is plain semver. */
export function pythonSemver(output: string | null): string | null {
  const m = output ? /^Python (\d+)\.(\d+)\.(\d+)/.exec(output) : null;
  return m ? `${Number(m[1])}.${Number(m[2])}.${Number(m[3])}` : null;
}

/**
 * Detects this host's capabilities and validates them with the same function the control plane uses,
 * so a bad label fails here with a clear message rather than as a 400 from the ingress.
 */
export async function detectCapabilities(
  labels: Readonly<Record<string, string>>,
  probe: HostProbe = systemHostProbe,
): Promise<CanonicalCapabilities> {
  const [disk, python] = await Promise.all([probe.freeDiskBytes(), probe.python3VersionOutput()]);
  const runtimes: RuntimeCapability[] = [{ name: 'node', version: probe.nodeVersion() }];
  const pythonVersion = pythonSemver(python);
  if (pythonVersion) runtimes.push({ name: 'python', version: pythonVersion });
  return canonicalizeCapabilities({
    architecture: probe.arch(),
    operatingSystem: probe.platform(),
    executors: [...WORKER_EXECUTORS],
    runtimes,
    labels: { ...labels },
    memoryMiB: Math.min(Math.floor(probe.totalMemoryBytes() / MiB), 1 << 30),
    diskMiB: Math.min(Math.floor(disk / MiB), 1 << 30),
    gpus: [],
    features: [],
  });
}
