/**
 * The golden transcripts (`wire-transcripts.json`, recorded against the real control plane by
 * test/e2e/wire-transcripts.e2e-spec.ts, ADR 0060) replayed on both sides: every request through the
 * control plane's reader of its call, every answer through the worker's strict reader of its call —
 * and for v1, the v1 check on both (no field the call file records as newer than v1).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WireVersion, fieldsAfter } from './call';
import { parseActivationResponse } from './activation-answer';
import { parseCompletionRequest } from './completion';
import { parseHeartbeat, parseHeartbeatAnswer } from './heartbeat';
import { parseLogsAnswer, parseLogsRequest } from './logs';
import { parseOfferResponse, parsePullRequest } from './offers';
import { parseRegisterAnswer, parseRegistration } from './register';
import { INGRESS_CALLS } from './requests';
import { parseRunningRequest } from './running';
import { parseLeaseFence } from './lease-fence';
import { ContractError } from './call';
import { hasControlCharacter } from '@ql/domain';
import { refuseNewerAnswerFields, shapeRequest, v1LogText } from './wire-shape';

interface Exchange {
  readonly call: keyof typeof INGRESS_CALLS;
  readonly status: number;
  readonly request: Record<string, unknown>;
  readonly answer: unknown;
}

/** Placeholders back to values of their kind: UUIDv7s by number, one time, one token. */
function materialize(value: unknown): unknown {
  if (typeof value === 'string') {
    const id = /^<uuid:(\d+)>$/.exec(value);
    if (id) return `01938e1e-0000-7000-8000-${id[1]!.padStart(12, '0')}`;
    if (value === '<time>') return '2026-12-07T12:00:00.000Z';
    if (value === '<token>') return 'q'.repeat(43);
    return value;
  }
  if (Array.isArray(value)) return value.map(materialize);
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, materialize(v)]));
  return value;
}

const golden = materialize(
  JSON.parse(readFileSync(join(__dirname, 'wire-transcripts.json'), 'utf8')),
) as Record<'v1' | 'v2', Exchange[]>;

const readRequest: Record<string, (body: unknown) => unknown> = {
  register: parseRegistration,
  heartbeat: parseHeartbeat,
  offers: parsePullRequest,
  starting: parseLeaseFence,
  running: parseRunningRequest,
  logs: parseLogsRequest,
  completion: parseCompletionRequest,
};
const readAnswer: Record<string, (bytes: string) => unknown> = {
  register: (b) => parseRegisterAnswer(b),
  heartbeat: (b) => parseHeartbeatAnswer(b),
  offers: parseOfferResponse,
  starting: parseActivationResponse,
  running: parseActivationResponse,
  logs: parseLogsAnswer,
  completion: parseActivationResponse,
};

describe.each<[string, WireVersion]>([
  ['v1', 1],
  ['v2', 2],
])('the golden %s transcript, replayed', (name, version) => {
  const transcript = golden[name as 'v1' | 'v2'];

  it('covers the calls of a run, every one answered 200', () => {
    expect(transcript.map((e) => [e.call, e.status])).toEqual(
      ['register', 'offers', 'starting', 'running', 'logs', 'completion', 'heartbeat'].map((c) => [c, 200]),
    );
  });

  it.each(transcript.map((e) => [e.call, e] as const))(
    '%s: the control plane reads the request, the worker reads the answer',
    (call, exchange) => {
      expect(() => readRequest[call]!(exchange.request)).not.toThrow();
      expect(() => readAnswer[call]!(JSON.stringify(exchange.answer))).not.toThrow();
      const descriptor = INGRESS_CALLS[call];
      const newer = fieldsAfter(descriptor, version, 'request');
      expect(newer.filter((field) => field in exchange.request)).toEqual([]);
      expect(() => refuseNewerAnswerFields(descriptor, version, exchange.answer)).not.toThrow();
    },
  );
});

describe('a worker in a v1 session sends v1 requests (ADR 0062)', () => {
  it.each(golden.v2.map((e, i) => [e.call, e, golden.v1[i]!] as const))(
    "%s: the v2 request shaped for v1 is the v1 transcript's request",
    (call, v2, v1) => {
      // The one difference by design: the version a register offers (ADR 0060 §1).
      const request = call === 'register' ? { ...v2.request, protocolVersion: 3 } : v2.request;
      expect(shapeRequest(INGRESS_CALLS[call], 1, request)).toEqual(v1.request);
    },
  );

  it('leaves out what only adds (stream, recoveryRequired, waitMs) and refuses what changes a call', () => {
    expect(shapeRequest(INGRESS_CALLS.offers, 1, { offerId: 'o', waitMs: 20_000 })).toEqual({ offerId: 'o' });
    expect(shapeRequest(INGRESS_CALLS.heartbeat, 1, { availableSlots: 2, recoveryRequired: 1 })).toEqual({
      availableSlots: 2,
    });
    const body = { outcome: 'succeeded', finalLogs: [{ seq: 0, stream: 'stdout', text: '签到\n' }] };
    expect(() => shapeRequest(INGRESS_CALLS.completion, 1, body)).toThrow(ContractError);
    expect(() => shapeRequest(INGRESS_CALLS.completion, 1, { executorHandle: 'pid:1' })).toThrow(
      /executorHandle:not_in_v1/,
    );
    // v2 sends them as they are.
    expect(shapeRequest(INGRESS_CALLS.completion, 2, body)).toBe(body);
  });

  it('output text as v1 took it: controls but tab, LF and CR become ?, never longer in UTF-8', () => {
    const raw = '\u001b[31m红色\u001b[0m\tok\r\n\u0007\u0085\u2028end';
    const v1 = v1LogText(raw);
    expect(v1).toBe('?[31m红色?[0m\tok\r\n???end');
    expect(hasControlCharacter(v1, true)).toBe(false);
    expect(Buffer.byteLength(v1)).toBeLessThanOrEqual(Buffer.byteLength(raw));
    expect(v1LogText('京东签到 ok\n')).toBe('京东签到 ok\n');
  });
});
