import fc from 'fast-check';
import { ATTEMPT_STATUSES, RUN_STATUSES, UnavailableError } from '@ql/domain';
import {
  ACTIVATION_STATUSES,
  ActivationContractError,
  ActivationSnapshot,
  RUN_ACTIVATION_MAX_BYTES,
  RUN_ACTIVATION_SCHEMA,
  buildActivationResponse,
  parseActivationResponse,
} from './activation-answer';
import { createIdGenerator } from '../system-ports';

const ids = createIdGenerator();

function snapshot(): ActivationSnapshot {
  return {
    runId: ids.uuidV7(),
    attemptId: ids.uuidV7(),
    runStatus: 'running',
    attemptStatus: 'starting',
    leaseVersion: 3,
    leaseGeneration: 1,
    callbackSequence: 1,
    deadlineAt: '2026-12-01T12:00:00.000Z',
  };
}
const valid = () => ({ schema: RUN_ACTIVATION_SCHEMA, status: 'applied', snapshot: snapshot() });

function refusal(input: string | Buffer): string {
  try {
    parseActivationResponse(input);
  } catch (error) {
    if (error instanceof ActivationContractError) return error.rule;
    throw error;
  }
  throw new Error('accepted');
}
type Editable = Record<string, unknown> & { snapshot: Record<string, unknown> };
const mutate = (fn: (r: Editable) => void) => {
  const r = valid() as unknown as Editable;
  fn(r);
  return JSON.stringify(r);
};

describe('qinglong/remote-run-activation@v1', () => {
  it('reads back exactly what was built, optional fields absent when not set', () => {
    const s = snapshot();
    const parsed = parseActivationResponse(
      JSON.stringify({ schema: RUN_ACTIVATION_SCHEMA, status: 'applied', snapshot: s }),
    );
    expect(parsed).toEqual({ schema: RUN_ACTIVATION_SCHEMA, status: 'applied', snapshot: s });
    expect('startedAt' in parsed.snapshot).toBe(false);
  });

  it.each<[string, string | Buffer, string]>([
    ['invalid JSON', '{"schema":', 'invalid_json'],
    ['a duplicate key', `{"status":"applied",${JSON.stringify(valid()).slice(1)}`, 'invalid_json'],
    ['bytes that are not UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), 'invalid_json'],
    ['oversized bytes', ' '.repeat(RUN_ACTIVATION_MAX_BYTES + 1), 'too_large'],
    ['not an object', '[]', ':must_be_object'],
    [
      'a wrong schema',
      mutate((r) => (r.schema = 'qinglong/remote-run-activation@v2')),
      'schema:unknown_schema',
    ],
    ['an unknown top-level field', mutate((r) => (r.extra = 1)), 'extra:unknown_field'],
    [
      'an unknown status',
      mutate((r) => (r.status = 'done')),
      'status:must_be_one_of:applied|already_starting|already_running|already_terminal',
    ],
    ['an unknown snapshot field', mutate((r) => (r.snapshot.token = 'x')), 'snapshot.token:unknown_field'],
    [
      'a missing fence (lease generation)',
      mutate((r) => delete r.snapshot.leaseGeneration),
      'snapshot.leaseGeneration:must_be_integer',
    ],
    [
      'a missing fence (lease version)',
      mutate((r) => delete r.snapshot.leaseVersion),
      'snapshot.leaseVersion:must_be_integer',
    ],
    [
      'a lease version out of range',
      mutate((r) => (r.snapshot.leaseVersion = -1)),
      'snapshot.leaseVersion:out_of_range',
    ],
    [
      'a lease generation 0',
      mutate((r) => (r.snapshot.leaseGeneration = 0)),
      'snapshot.leaseGeneration:out_of_range',
    ],
    [
      'a fractional sequence',
      mutate((r) => (r.snapshot.callbackSequence = 1.5)),
      'snapshot.callbackSequence:must_be_integer',
    ],
    [
      'a sequence past 2^31',
      mutate((r) => (r.snapshot.callbackSequence = 2 ** 31)),
      'snapshot.callbackSequence:out_of_range',
    ],
    [
      'an unknown run status',
      mutate((r) => (r.snapshot.runStatus = 'paused')),
      `snapshot.runStatus:must_be_one_of:${RUN_STATUSES.join('|')}`,
    ],
    [
      'an unknown attempt status',
      mutate((r) => (r.snapshot.attemptStatus = 'queued')),
      `snapshot.attemptStatus:must_be_one_of:${ATTEMPT_STATUSES.join('|')}`,
    ],
    [
      'a run id that is not a UUIDv7',
      mutate((r) => (r.snapshot.runId = '00000000-0000-4000-8000-000000000000')),
      'snapshot.runId:invalid_uuid',
    ],
    [
      'a control character',
      mutate((r) => (r.snapshot.executorHandle = 'pid:1\n2')),
      'snapshot.executorHandle:control_character',
    ],
    [
      'a null optional field',
      mutate((r) => (r.snapshot.startedAt = null)),
      'snapshot.startedAt:must_be_string',
    ],
    [
      'a time in another format',
      mutate((r) => (r.snapshot.deadlineAt = '2026-12-01 12:00')),
      'snapshot.deadlineAt:invalid_format',
    ],
    [
      'an over-long error code',
      mutate((r) => (r.snapshot.errorCode = 'e'.repeat(65))),
      'snapshot.errorCode:too_long',
    ],
  ])('refuses %s', (_name, input, rule) => {
    expect(refusal(input)).toBe(rule);
  });

  it('every valid response round-trips through the parser unchanged (property)', () => {
    const time = fc
      .integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2100, 0, 1) })
      .map((ms) => new Date(ms).toISOString());
    const arb = fc.record(
      {
        runId: fc.constant(null).map(() => ids.uuidV7()),
        attemptId: fc.constant(null).map(() => ids.uuidV7()),
        runStatus: fc.constantFrom(...RUN_STATUSES),
        attemptStatus: fc.constantFrom(...ATTEMPT_STATUSES),
        leaseVersion: fc.nat(),
        leaseGeneration: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        callbackSequence: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        deadlineAt: time,
        startedAt: time,
        finishedAt: time,
        executorHandle: fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/),
        logId: fc.stringMatching(/^[A-Za-z0-9._:-]{1,64}$/),
        errorCode: fc.stringMatching(/^[a-z][a-z0-9_]{0,63}$/),
      },
      {
        requiredKeys: [
          'runId',
          'attemptId',
          'runStatus',
          'attemptStatus',
          'leaseVersion',
          'leaseGeneration',
          'callbackSequence',
        ],
      },
    );
    fc.assert(
      fc.property(fc.constantFrom(...ACTIVATION_STATUSES), arb, (status, s) => {
        const built = buildActivationResponse(status, s as ActivationSnapshot);
        expect(built).toEqual({ schema: RUN_ACTIVATION_SCHEMA, status, snapshot: s });
        expect(Buffer.byteLength(JSON.stringify(built))).toBeLessThanOrEqual(RUN_ACTIVATION_MAX_BYTES);
      }),
    );
  });

  it('a corrupt internal projection becomes an unavailable error (503), never a response', () => {
    const corrupt = { ...snapshot(), executorHandle: 'pid 12 \u0000 secret' };
    expect(() => buildActivationResponse('applied', corrupt)).toThrow(UnavailableError);
    const unknownField = { ...snapshot(), leaseTokenDigest: 'ab'.repeat(32) } as ActivationSnapshot;
    expect(() => buildActivationResponse('applied', unknownField)).toThrow(UnavailableError);
  });
});
