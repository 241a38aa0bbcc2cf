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
import { refuseNewerAnswerFields } from './wire-shape';

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
