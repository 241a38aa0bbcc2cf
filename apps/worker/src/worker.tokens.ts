/** Injection tokens of the worker module graph. */
export const WORKER_CONFIG = Symbol('WorkerConfig');
export const WORKER_INGRESS_CLIENT = Symbol('WorkerIngressClient');
export const HOST_PROBE = Symbol('HostProbe');
/** The certificate/key/CA files the client reads (`FileCredentials`): the renewer tells it of new ones. */
export const WORKER_CREDENTIALS = Symbol('WorkerCredentials');
/** The worker's certificate keeper (enrollment and rotation, ADR 0045). */
export const WORKER_CERTIFICATE = Symbol('WorkerCertificate');

/** The software version the worker declares at registration; kept equal to package.json by a test. */
export const WORKER_SOFTWARE_VERSION = '0.1.0';
/**
 * The protocol versions the worker speaks (ADR 0060): 3 (wire v1) up to 4 (wire v2). It registers
 * with `QL_WORKER_PROTOCOL_MAX` (default the highest) and steps down on a refusal.
 */
export const WORKER_PROTOCOL_MIN = 3;
export const WORKER_PROTOCOL_VERSION = 4;
/** The runs the lifecycle drives (`RunSupervisor`); absent, the worker only keeps its session. */
export const WORKER_RUNS = Symbol('WorkerRuns');
