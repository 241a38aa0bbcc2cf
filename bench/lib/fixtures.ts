/** Registration fixtures for benchmarks (copied from test/support/fixtures.ts; bench/ must not import test/). */
import { randomBytes } from 'node:crypto';
import { RegistrationSnapshot, formatUuidV7 } from '@ql/domain';
import { parseRegistration } from '@ql/contracts';

/** A register body as a worker sends it. */
export function benchRegistration() {
  return {
    capabilities: {
      architecture: 'x64',
      operatingSystem: 'linux',
      executors: ['local-process'],
      runtimes: [
        { name: 'node', version: '20.20.2' },
        { name: 'python', version: '3.11.7' },
      ],
      labels: { zone: 'bench' },
      memoryMiB: 256,
      diskMiB: 1024,
      gpus: [],
      features: ['cron'],
    },
    maxConcurrentRuns: 4,
    availableSlots: 4,
    softwareVersion: '0.1.0',
    protocolVersion: 4,
  };
}

export function benchSnapshot(): RegistrationSnapshot {
  return parseRegistration(benchRegistration());
}

let lastMs = 0;
/** A fresh UUIDv7, strictly later than the previous one made here. */
export function newSessionId(): string {
  lastMs = Math.max(Date.now(), lastMs + 1);
  return formatUuidV7(lastMs, randomBytes(10));
}
