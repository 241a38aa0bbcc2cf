/**
 * Reads a V8 `.cpuprofile` of the control plane (`node --cpu-prof`) and splits the samples of the
 * drain window by layer, from the frame each sample was taken in (self time). The window runs from
 * the first to the last sample inside an activation route handler, so start-up and the backlog's
 * admin triggers are left out.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Layers in the order the report lists them; the first rule that matches a frame wins. */
export const LAYERS = [
  'socket writes (TLS encryption + write syscall; wall time)',
  'garbage collection',
  'PostgreSQL driver (pg, pg-protocol, pg-types, dates)',
  'class-validator',
  'Nest (router, guards, pipes, exception zone)',
  'Fastify (routing, hooks, reply, serialization)',
  'metrics (prom-client and the HTTP hook)',
  'ours: edge (guards, validation pipe, DTOs, errors)',
  'ours: services, repositories, domain, contracts',
  'Node (HTTP, TLS, streams, events, buffers, timers)',
  'other (V8 runtime, microtasks, unattributed)',
] as const;
export type Layer = (typeof LAYERS)[number];

const RULES: readonly [Layer, (f: CallFrame) => boolean][] = [
  [LAYERS[0], (f) => /^(writev|writeBuffer|writeUtf8String|writeLatin1String)$/.test(f.functionName)],
  [LAYERS[1], (f) => f.functionName === '(garbage collector)'],
  [LAYERS[2], (f) => /node_modules\/(pg|pg-protocol|pg-types|pg-pool|postgres-[a-z]+|pgpass)\//.test(f.url)],
  [LAYERS[3], (f) => /node_modules\/(class-validator|validator|libphonenumber-js)\//.test(f.url)],
  [LAYERS[4], (f) => /node_modules\/@nestjs\//.test(f.url)],
  [
    LAYERS[5],
    (f) =>
      /node_modules\/(fastify|@fastify\/[^/]+|find-my-way|fast-json-stringify|avvio|light-my-request|fast-querystring|fast-decode-uri-component|toad-cache|process-warning|abstract-logging|pino[^/]*|secure-json-parse|fast-content-type-parse|rfdc|ret|safe-regex2|json-schema-ref-resolver|@fastify)\//.test(
        f.url,
      ),
  ],
  [
    LAYERS[6],
    (f) => /node_modules\/(prom-client|tdigest|bintrees)\/|\/control-plane\/src\/metrics\//.test(f.url),
  ],
  [LAYERS[7], (f) => /\/apps\/control-plane\/src\/(http|identity)\//.test(f.url)],
  [LAYERS[8], (f) => /\/(apps\/control-plane\/src|libs\/[^/]+\/src)\//.test(f.url)],
  [
    LAYERS[9],
    (f) =>
      f.url.startsWith('node:') ||
      /^(readable|writable|duplex|stream_base_commons|task_queues|timers|events|buffer)$/.test(f.url),
  ],
];

function layerOf(frame: CallFrame): Layer {
  for (const [layer, test] of RULES) if (test(frame)) return layer;
  return LAYERS[10];
}

export interface ProfileSplit {
  /** Busy samples (not idle) in the drain window, by layer: their share of the window's busy time. */
  readonly share: Record<Layer, number>;
  readonly busyMs: number;
  readonly windowMs: number;
}

/** The layers of the busy samples between the first and the last one inside `windowFrame`'s file. */
export function splitProfile(path: string, windowFile = 'activation-ingress.controller.js'): ProfileSplit {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inWindowFile = (id: number): boolean => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at))
      if (byId.get(at)!.callFrame.url.endsWith(windowFile)) return true;
    return false;
  };
  const times: number[] = [];
  let t = 0;
  for (const dt of profile.timeDeltas) times.push((t += dt));
  let first = -1;
  let last = -1;
  profile.samples.forEach((id, i) => {
    if (!inWindowFile(id)) return;
    if (first < 0) first = i;
    last = i;
  });
  if (first < 0) throw new Error(`no sample inside ${windowFile}: was the profile taken during a drain?`);
  const micros = Object.fromEntries(LAYERS.map((l) => [l, 0])) as Record<Layer, number>;
  let busy = 0;
  for (let i = first; i <= last; i++) {
    const frame = byId.get(profile.samples[i]!)!.callFrame;
    if (frame.functionName === '(idle)') continue;
    const dt = profile.timeDeltas[i]!;
    micros[layerOf(frame)] += dt;
    busy += dt;
  }
  const share = Object.fromEntries(LAYERS.map((l) => [l, busy ? micros[l] / busy : 0])) as Record<
    Layer,
    number
  >;
  return { share, busyMs: busy / 1000, windowMs: (times[last]! - times[first]!) / 1000 };
}
