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
  NotFoundError,
  RevokedCertificate,
  SESSION_STATUSES,
  SessionStatus,
  ValidationError,
  WORKER_SESSION_REPOSITORY,
  WorkerRecord,
  WorkerSessionRepository,
  parseWorkerId,
  readEnum,
  readObject,
  readString,
} from '@ql/domain';
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
  ) {}

  async listWorkers(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['status', 'after', 'limit']);
    const status = q.status === undefined ? undefined : readEnum(q.status, 'status', SESSION_STATUSES);
    const afterWorkerId = q.after === undefined ? undefined : parseWorkerId(q.after, 'after');
    const limit = readLimit(q.limit);
    const workers = await this.sessions.listWorkers({ status, afterWorkerId, limit });
    return {
      items: workers.map(toWorkerView),
      nextAfter: workers.length === limit ? workers[workers.length - 1]!.workerId : null,
    };
  }

  async getWorker(workerId: string) {
    const worker = await this.sessions.findWorker(parseWorkerId(workerId));
    if (!worker) throw new NotFoundError('worker');
    return toWorkerView(worker);
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

function toRevokedView(r: RevokedCertificate) {
  return { ...r, revokedAt: new Date(r.revokedAt).toISOString() };
}

export function toWorkerView(w: WorkerRecord) {
  const s = w.session;
  return {
    workerId: w.workerId,
    disabled: w.disabled,
    status: s.status as SessionStatus,
    sessionId: s.sessionId,
    generation: s.generation,
    version: s.version,
    leaseExpiresAt: new Date(s.leaseExpiresAt).toISOString(),
    maxConcurrentRuns: s.maxConcurrentRuns,
    availableSlots: s.availableSlots,
    softwareVersion: w.softwareVersion,
    protocolVersion: w.protocolVersion,
    capabilities: w.capabilities,
    capabilitiesDigest: w.capabilitiesDigest,
    registeredAt: new Date(w.registeredAt).toISOString(),
    lastSeenAt: new Date(w.lastSeenAt).toISOString(),
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
