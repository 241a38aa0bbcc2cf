import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  ENV_VAR_SECRET_PREFIX,
  NotFoundError,
  ValidationError,
  SECRET_LIMITS,
  SECRET_NAME_PATTERN,
  SECRET_REPOSITORY,
  SecretPutMode,
  SecretRecord,
  SecretRepository,
  parseSecretName,
  parseSecretValue,
} from '@ql/domain';
import { namePage } from '../admin/query-params';

/** Who asks: an API key on the admin API, `{id: 'cli'}` from the CLI. */
type Actor = { readonly id: string };

/**
 * Secrets on the admin API and the CLI (ADR 0050): the value goes in, sealed, and never comes out —
 * no answer, audit row or log line holds it. The domain's readers check each input again behind the DTO.
 */
@Injectable()
export class SecretsService {
  private readonly logger = new Logger('secrets');

  constructor(@Inject(SECRET_REPOSITORY) private readonly secrets: SecretRepository) {}

  async put(actor: Actor, name: unknown, value: unknown, mode: SecretPutMode) {
    const secret = parseSecretName(name);
    if (secret.startsWith(ENV_VAR_SECRET_PREFIX))
      throw new ValidationError(
        'name',
        'reserved_prefix',
        `name: reserved_prefix: secrets named ${ENV_VAR_SECRET_PREFIX}* hold env vars' values; use /api/v1/env-vars`,
      );
    const sealedValue = parseSecretValue(value);
    const { record, created } = await this.secrets.put(
      secret,
      sealedValue,
      { actor: actor.id, action: 'secret.put', target: `secret:${secret}` },
      mode,
    );
    this.logger.log({
      msg: created ? 'secret created' : 'secret replaced',
      name: secret,
      keyId: record.keyId,
    });
    return { ...toView(record), created };
  }

  async get(name: string) {
    const record = await this.secrets.find(parseSecretName(name));
    if (!record) throw new NotFoundError('secret');
    return toView(record);
  }

  list(query: unknown) {
    return namePage(
      query,
      { max: SECRET_LIMITS.nameLength, pattern: SECRET_NAME_PATTERN },
      (page) => this.secrets.list(page),
      toView,
    );
  }

  async delete(actor: Actor, name: string) {
    const secret = parseSecretName(name);
    const record = await this.secrets.delete(secret, {
      actor: actor.id,
      action: 'secret.delete',
      target: `secret:${secret}`,
    });
    this.logger.log({ msg: 'secret deleted', name: secret });
    return { ...toView(record), deleted: true };
  }

  async rotate(actor: Actor) {
    const result = await this.secrets.rotate({ actor: actor.id, action: 'secret.rotate', target: 'secrets' });
    this.logger.log({ msg: 'secrets re-encrypted to the current key', ...result });
    return result;
  }
}

function toView(s: SecretRecord) {
  return {
    name: s.name,
    keyId: s.keyId,
    createdAt: new Date(s.createdAt).toISOString(),
    updatedAt: new Date(s.updatedAt).toISOString(),
    usedBy: [...s.usedBy],
  };
}
