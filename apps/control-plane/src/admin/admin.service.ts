import { Inject, Injectable } from '@nestjs/common';
import {
  API_KEY_REPOSITORY,
  API_KEY_ROLES,
  ApiKeyRecord,
  ApiKeyRepository,
  AUDIT_REPOSITORY,
  CERTIFICATE_REVOCATION_REPOSITORY,
  CertificateRevocationRepository,
  AuditRepository,
  ID_GENERATOR,
  IdGenerator,
  LABEL_KEY_PATTERN,
  CAPABILITY_LIMITS,
  MAX_CONCURRENT_RUNS,
  NotFoundError,
  RevokedCertificate,
  ValidationError,
  WORKER_CERTIFICATE_REPOSITORY,
  WORKER_SESSION_REPOSITORY,
  WorkerActiveRun,
  WorkerCertificateRepository,
  WorkerRecord,
  WorkerSessionRepository,
  WORKER_STATUSES,
  parseWorkerId,
  readEnum,
  readObject,
  readString,
} from '@ql/domain';
import { wireVersionOf } from '@ql/contracts';
import { apiKeyDigest, newApiKeyToken } from '../identity/api-keys';
import {
  API_KEY_NAME_MAX_LENGTH,
  FINGERPRINT_MAX_LENGTH,
  REVOCATION_REASON_MAX_LENGTH,
} from './admin-limits';
import type { CreateApiKeyDto, RevokeCertificateDto } from './dto/admin-bodies.dto';
import { readLimit } from './query-params';

/** The admin slice of issue 2: workers (list, get, disable, enable), API keys, audit (R-ADM-1, R-ID-4/5). */
@Injectable()
export class AdminService {
  constructor(
    @Inject(WORKER_SESSION_REPOSITORY) private readonly sessions: WorkerSessionRepository,
    @Inject(API_KEY_REPOSITORY) private readonly apiKeys: ApiKeyRepository,
    @Inject(AUDIT_REPOSITORY) private readonly audit: AuditRepository,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    @Inject(CERTIFICATE_REVOCATION_REPOSITORY) private readonly revocations: CertificateRevocationRepository,
    @Inject(WORKER_CERTIFICATE_REPOSITORY) private readonly certificates: WorkerCertificateRepository,
  ) {}

  async listWorkers(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['status', 'label', 'capabilitiesDigest', 'after', 'limit']);
    const status = q.status === undefined ? undefined : readEnum(q.status, 'status', WORKER_STATUSES);
    const label = q.label === undefined ? undefined : readLabelFilter(q.label);
    const capabilitiesDigest =
      q.capabilitiesDigest === undefined
        ? undefined
        : readString(q.capabilitiesDigest, 'capabilitiesDigest', { max: 64, pattern: SHA256_HEX });
    const afterWorkerId = q.after === undefined ? undefined : parseWorkerId(q.after, 'after');
    const limit = readLimit(q.limit);
    const workers = await this.sessions.listWorkers({
      status,
      label,
      capabilitiesDigest,
      afterWorkerId,
      limit,
    });
    return {
      items: workers.map(toWorkerView),
      nextAfter: workers.length === limit ? workers[workers.length - 1]!.workerId : null,
    };
  }

  /** The worker and the runs its sessions hold live leases for (at most MAX_CONCURRENT_RUNS). */
  async getWorker(workerId: string) {
    const id = parseWorkerId(workerId);
    const worker = await this.sessions.findWorker(id);
    if (!worker) throw new NotFoundError('worker');
    const activeRuns = await this.sessions.activeRuns(id, MAX_CONCURRENT_RUNS);
    // The certificate it holds now: a renewal mid-session replaces the one the session registered with.
    const certificateFingerprint =
      worker.certificate?.fingerprint ?? (await this.sessions.sessionCertificate(worker.session.sessionId));
    return { ...toWorkerView(worker), certificateFingerprint, activeRuns: activeRuns.map(toActiveRunView) };
  }

  /** R-ADM-1: capacity 0 now; the worker learns it from its next heartbeat answer. */
  async drain(actor: ApiKeyRecord, workerId: string) {
    const id = parseWorkerId(workerId);
    const worker = await this.sessions.drainWorker(id, {
      actor: actor.id,
      action: 'worker.drain',
      target: `worker:${id}`,
    });
    return toWorkerView(worker);
  }

  /** ADR 0035: the reverse of drain; the worker learns it from its next heartbeat answer and pulls. */
  async resume(actor: ApiKeyRecord, workerId: string) {
    const id = parseWorkerId(workerId);
    const worker = await this.sessions.resumeWorker(id, {
      actor: actor.id,
      action: 'worker.resume',
      target: `worker:${id}`,
    });
    return toWorkerView(worker);
  }

  /** R-ADM-1: only an offline worker holding no lease; its history keeps naming it (ADR 0013). */
  async deleteWorker(actor: ApiKeyRecord, workerId: string) {
    const id = parseWorkerId(workerId);
    const worker = await this.sessions.deleteWorker(id, {
      actor: actor.id,
      action: 'worker.delete',
      target: `worker:${id}`,
    });
    return { ...toWorkerView(worker), deleted: true as const };
  }

  async setDisabled(actor: ApiKeyRecord, workerId: string, disabled: boolean) {
    const id = parseWorkerId(workerId);
    const worker = await this.sessions.setDisabled(id, disabled, {
      actor: actor.id,
      action: disabled ? 'worker.disable' : 'worker.enable',
      target: `worker:${id}`,
    });
    return toWorkerView(worker);
  }

  /**
   * Revokes every certificate the control plane issued to the worker (ADR 0045 §6), through the
   * revocation list: every replica refuses them within QL_REVOCATION_CACHE_MS, and none renews.
   * A worker that enrolled but never registered has certificates too: no worker row is needed.
   */
  async revokeWorker(actor: ApiKeyRecord, workerId: string) {
    const id = parseWorkerId(workerId);
    const fingerprints = await this.certificates.revokeWorker(id, 'worker revoked', {
      actor: actor.id,
      action: 'worker.revoke',
      target: `worker:${id}`,
      detail: { workerId: id },
    });
    return { workerId: id, fingerprints };
  }

  /** The body is a validated DTO on the API; the CLI hands in what it was given, hence the reads. */
  async createApiKey(actor: ApiKeyRecord | { id: string }, body: CreateApiKeyDto | Record<string, unknown>) {
    const b = readObject(body, '', ['name', 'role']);
    const name = readString(b.name, 'name', { max: API_KEY_NAME_MAX_LENGTH });
    const role = readEnum(b.role, 'role', API_KEY_ROLES);
    const token = newApiKeyToken();
    const id = this.ids.uuidV7();
    const record = await this.apiKeys.create(
      { id, name, role, digest: apiKeyDigest(token) },
      { actor: actor.id, action: 'api_key.create', target: `api_key:${id}`, detail: { role } },
    );
    return { ...toKeyView(record), token };
  }

  async listApiKeys() {
    return { items: (await this.apiKeys.list()).map(toKeyView) };
  }

  async revokeApiKey(actor: ApiKeyRecord, id: string) {
    readString(id, 'id', { max: 36, pattern: /^[0-9a-f-]{36}$/ });
    return toKeyView(
      await this.apiKeys.revoke(id, { actor: actor.id, action: 'api_key.revoke', target: `api_key:${id}` }),
    );
  }

  /** R-ID-4: refuse a worker certificate by SHA-256 fingerprint (hex, colons and case ignored). */
  async revokeCertificate(actor: ApiKeyRecord, body: RevokeCertificateDto) {
    const b = readObject(body, '', ['fingerprint', 'reason']);
    const raw = readString(b.fingerprint, 'fingerprint', { max: FINGERPRINT_MAX_LENGTH });
    const fingerprint = raw.replace(/:/g, '').toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(fingerprint)) throw new ValidationError('fingerprint', 'must_be_sha256_hex');
    const reason =
      b.reason === undefined ? null : readString(b.reason, 'reason', { max: REVOCATION_REASON_MAX_LENGTH });
    const revoked = await this.revocations.revoke(fingerprint, reason, {
      actor: actor.id,
      action: 'certificate.revoke',
      target: `certificate:${fingerprint}`,
    });
    return toRevokedView(revoked);
  }

  async listRevokedCertificates(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['limit']);
    const limit = readLimit(q.limit);
    const items = await this.revocations.list(limit);
    return { items: items.map(toRevokedView) };
  }

  async listAudit(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['limit']);
    const limit = readLimit(q.limit);
    const entries = await this.audit.list(limit);
    return { items: entries.map((e) => ({ ...e, at: new Date(e.at).toISOString() })) };
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** `?label=key=value`: one label, split at the first `=`; the value may be empty, as labels allow. */
function readLabelFilter(value: unknown): { key: string; value: string } {
  const raw = readString(value, 'label', {
    max: CAPABILITY_LIMITS.labelKeyLength + 1 + CAPABILITY_LIMITS.labelValueLength,
  });
  const at = raw.indexOf('=');
  if (at < 0) throw new ValidationError('label', 'must_be_key_equals_value');
  return {
    key: readString(raw.slice(0, at), 'label', {
      max: CAPABILITY_LIMITS.labelKeyLength,
      pattern: LABEL_KEY_PATTERN,
    }),
    value: readString(raw.slice(at + 1), 'label', { max: CAPABILITY_LIMITS.labelValueLength, min: 0 }),
  };
}

function toActiveRunView(r: WorkerActiveRun) {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    runId: r.runId,
    attemptId: r.attemptId,
    attemptNo: r.attemptNo,
    attemptStatus: r.attemptStatus,
    offerId: r.offerId,
    sessionId: r.sessionId,
    leaseGeneration: r.leaseGeneration,
    leaseExpiresAt: new Date(r.leaseExpiresAt).toISOString(),
    startedAt: iso(r.startedAt),
    deadlineAt: iso(r.deadlineAt),
  };
}

function toRevokedView(r: RevokedCertificate) {
  return { ...r, revokedAt: new Date(r.revokedAt).toISOString() };
}

export function toWorkerView(w: WorkerRecord) {
  const s = w.session;
  return {
    workerId: w.workerId,
    disabled: w.disabled,
    status: w.status,
    sessionId: s.sessionId,
    generation: s.generation,
    version: s.version,
    leaseExpiresAt: new Date(s.leaseExpiresAt).toISOString(),
    maxConcurrentRuns: s.maxConcurrentRuns,
    availableSlots: s.availableSlots,
    softwareVersion: w.softwareVersion,
    protocolVersion: w.protocolVersion,
    // Every session registered with a served version; one from before (none exists) reads as v1.
    wireVersion: wireVersionOf(w.protocolVersion) ?? 1,
    capabilities: w.capabilities,
    capabilitiesDigest: w.capabilitiesDigest,
    registeredAt: new Date(w.registeredAt).toISOString(),
    lastSeenAt: new Date(w.lastSeenAt).toISOString(),
    recoveryRequired: w.recoveryRequired,
    certificateIssuedAt: w.certificate ? new Date(w.certificate.issuedAt).toISOString() : null,
    certificateNotAfter: w.certificate ? new Date(w.certificate.notAfter).toISOString() : null,
  };
}

function toKeyView(k: ApiKeyRecord) {
  return {
    id: k.id,
    name: k.name,
    role: k.role,
    createdAt: new Date(k.createdAt).toISOString(),
    revokedAt: k.revokedAt === null ? null : new Date(k.revokedAt).toISOString(),
  };
}
