import { randomBytes } from 'node:crypto';
import { FencedError, RegistrationSnapshot, formatUuidV7 } from '@ql/domain';
import { parseRegistration } from '@ql/contracts';

export function validCapabilities(overrides: Record<string, unknown> = {}) {
  return {
    architecture: 'x64',
    operatingSystem: 'linux',
    executors: ['local-process'],
    runtimes: [
      { name: 'node', version: '20.20.2' },
      { name: 'python', version: '3.11.7' },
    ],
    labels: { zone: 'lab', 'kubernetes.io/hostname': 'node-1' },
    memoryMiB: 256,
    diskMiB: 1024,
    gpus: [],
    features: ['cron'],
    ...overrides,
  };
}

export function registerBody(overrides: Record<string, unknown> = {}) {
  return {
    capabilities: validCapabilities(),
    maxConcurrentRuns: 4,
    availableSlots: 4,
    softwareVersion: '0.1.0',
    // A current worker (wire v2, ADR 0060); a test of a v1 session says 3.
    protocolVersion: 4,
    ...overrides,
  };
}

export function snapshot(overrides: Record<string, unknown> = {}): RegistrationSnapshot {
  return parseRegistration(registerBody(overrides));
}

let lastMs = 0;
/** A fresh UUIDv7, strictly later than the previous one made here. */
export function newSessionId(): string {
  lastMs = Math.max(Date.now(), lastMs + 1);
  return formatUuidV7(lastMs, randomBytes(10));
}

/** A clock tests move by hand. */
export class ManualClock {
  constructor(private current = Date.UTC(2026, 11, 1)) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

/** The call fails closed with a FencedError of this area and reason. */
export async function expectFence(promise: Promise<unknown>, area: string, reason: string): Promise<void> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FencedError);
  expect({ area: (error as FencedError).area, reason: (error as FencedError).reason }).toEqual({
    area,
    reason,
  });
}

/** The events of a run whose first attempt succeeded, in order (the README's walkthrough shows them). */
export const SUCCEEDED_RUN_EVENTS = [
  'run.created',
  'run.dispatching',
  'attempt.claimed',
  'attempt.starting',
  'attempt.running',
  'run.running',
  'attempt.finished',
  'run.finished',
];
