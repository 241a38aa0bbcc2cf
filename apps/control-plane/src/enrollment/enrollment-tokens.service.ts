import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  CLOCK,
  Clock,
  ENROLLMENT_TOKEN_REPOSITORY,
  EnrollmentRefusedError,
  EnrollmentTokenRecord,
  EnrollmentTokenRepository,
  EnrollmentTokenUse,
  ID_GENERATOR,
  IdGenerator,
  IssuedWorkerCertificate,
  WorkerCertificateRecord,
  parseEnrollmentTokenSpec,
  readObject,
} from '@ql/domain';
import { readLimit } from '../admin/query-params';
import { parseResourceId } from '../runs/resource-ids';
import type { CreateEnrollmentTokenDto } from './dto/enrollment-token.dto';

/** Who asks: an API key on the admin API, `{id: 'cli'}` from the CLI. */
type Actor = { readonly id: string };

/**
 * Enrollment tokens (ADR 0045 §1): made, listed and revoked by admins (API and CLI), consumed by the
 * enrollment route. The token appears in one answer, `create`'s, and nowhere else: not in a list, an
 * audit row or a log line.
 */
@Injectable()
export class EnrollmentTokensService {
  private readonly logger = new Logger('enrollment');

  constructor(
    @Inject(ENROLLMENT_TOKEN_REPOSITORY) private readonly tokens: EnrollmentTokenRepository,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /** The body is a validated DTO on the API; the CLI hands in what it was given, hence the one reader. */
  async create(actor: Actor, body: CreateEnrollmentTokenDto | Record<string, unknown>) {
    const spec = parseEnrollmentTokenSpec(body);
    const id = this.ids.uuidV7();
    const { token, record } = await this.tokens.create(
      { id, spec, createdBy: actor.id },
      {
        actor: actor.id,
        action: 'enrollment_token.create',
        target: `enrollment_token:${id}`,
        detail: {
          ...(spec.workerId !== null ? { workerId: spec.workerId } : { pattern: spec.pattern }),
          maxWorkers: spec.maxWorkers,
          ttlSeconds: spec.ttlSeconds,
          ...(spec.mayReplace ? { mayReplace: true } : {}),
        },
      },
    );
    this.logger.log({ msg: 'enrollment token created', ...logFields(record) });
    return { ...toTokenView(record), token };
  }

  async list(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['after', 'limit']);
    const afterId = q.after === undefined ? undefined : parseResourceId(q.after, 'after');
    const limit = readLimit(q.limit);
    const items = await this.tokens.list({ afterId, limit });
    return {
      items: items.map(toTokenView),
      nextAfter: items.length === limit ? items[items.length - 1]!.id : null,
    };
  }

  async revoke(actor: Actor, id: string) {
    const tokenId = parseResourceId(id, 'id');
    const record = await this.tokens.revoke(tokenId, {
      actor: actor.id,
      action: 'enrollment_token.revoke',
      target: `enrollment_token:${tokenId}`,
    });
    this.logger.log({ msg: 'enrollment token revoked', ...logFields(record) });
    return toTokenView(record);
  }

  /**
   * For the enrollment route (ADR 0045 §2): enrolls `workerId` with `token` now, or rejects with
   * EnrollmentRefusedError (its `code` is the wire code) having written only the audit row.
   */
  /**
   * With `sign`, the certificate it signs is recorded in the same transaction as the use (ADR 0045
   * §2): a signing failure leaves the token unused.
   */
  async consume(
    workerId: string,
    token: string,
    sign?: (at: number) => Promise<IssuedWorkerCertificate>,
  ): Promise<EnrollmentTokenUse & { readonly certificate?: WorkerCertificateRecord }> {
    try {
      const at = this.clock.now();
      const use = await this.tokens.consume(workerId, token, at, sign && (() => sign(at)));
      this.logger.log({ msg: 'enrollment token used', tokenId: use.tokenId, workerId });
      return use;
    } catch (error) {
      if (error instanceof EnrollmentRefusedError)
        this.logger.warn({ msg: 'enrollment refused', workerId, code: error.code });
      throw error;
    }
  }
}

/** What a log line says of a token: its id and what it enrolls, never the token. */
function logFields(t: EnrollmentTokenRecord) {
  return { tokenId: t.id, workerId: t.workerId, pattern: t.pattern, maxWorkers: t.maxWorkers };
}

function toTokenView(t: EnrollmentTokenRecord) {
  return {
    id: t.id,
    workerId: t.workerId,
    pattern: t.pattern,
    maxWorkers: t.maxWorkers,
    uses: t.uses,
    status: t.status,
    expiresAt: new Date(t.expiresAt).toISOString(),
    revokedAt: t.revokedAt === null ? null : new Date(t.revokedAt).toISOString(),
    mayReplace: t.mayReplace,
    createdBy: t.createdBy,
    createdAt: new Date(t.createdAt).toISOString(),
  };
}
