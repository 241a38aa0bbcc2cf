import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  ENV_VAR_LIMITS,
  ENV_VAR_NAME_PATTERN,
  ENV_VAR_REPOSITORY,
  EnvVarRecord,
  EnvVarRepository,
  NotFoundError,
  parseEnvVarChange,
  parseEnvVarName,
  parseEnvVarOrder,
  parseNewEnvVar,
  parseEnvImport,
  readObject,
  readString,
  ValidationError,
  ENV_IMPORT_MAX_BYTES,
} from '@ql/domain';
import { namePage } from '../admin/query-params';

type Actor = { readonly id: string };

/**
 * Global env vars on the admin API (issue 31 item 2, ADR 0061). The domain's readers judge every
 * input again behind the DTOs; a secret variable's value never comes out, nor goes to a log line.
 */
@Injectable()
export class EnvVarsService {
  private readonly logger = new Logger('env-vars');

  constructor(@Inject(ENV_VAR_REPOSITORY) private readonly vars: EnvVarRepository) {}

  async create(actor: Actor, body: unknown) {
    const input = parseNewEnvVar(body);
    const record = await this.vars.create(input, this.audit(actor, input.name));
    this.logger.log({ msg: 'env var created', name: record.name, secret: record.secret });
    return toView(record);
  }

  async update(actor: Actor, name: string, body: unknown) {
    const key = parseEnvVarName(name);
    const record = await this.vars.update(key, parseEnvVarChange(body), this.audit(actor, key));
    this.logger.log({ msg: 'env var changed', name: key, version: record.version });
    return toView(record);
  }

  async delete(actor: Actor, name: string) {
    const key = parseEnvVarName(name);
    const record = await this.vars.delete(key, this.audit(actor, key));
    this.logger.log({ msg: 'env var deleted', name: key });
    return { ...toView(record), deleted: true as const };
  }

  async reorder(actor: Actor, body: unknown) {
    const records = await this.vars.reorder(parseEnvVarOrder(body), {
      actor: actor.id,
      action: 'env_var.reorder',
      target: 'env_vars',
    });
    return { items: records.map(toView) };
  }

  async import(actor: Actor, body: unknown) {
    const raw = readObject(body, '', ['content', 'apply', 'plain']);
    const content = readString(raw.content, 'content', { max: ENV_IMPORT_MAX_BYTES, output: true });
    const plain = raw.plain === undefined ? [] : parseEnvVarOrder({ names: raw.plain }).slice();
    if (raw.apply !== undefined && typeof raw.apply !== 'boolean')
      throw new ValidationError('apply', 'must_be_boolean');
    const source = parseEnvImport(content, plain);
    const plan = await this.vars.import(source.entries, raw.apply === true, {
      actor: actor.id,
      action: 'env_var.import',
      target: 'env_vars',
    });
    if (plan.applied)
      this.logger.log({ msg: 'env vars imported', created: plan.create.length, updated: plan.update.length });
    return { ...plan, skipped: source.skipped };
  }

  async get(name: string) {
    const record = await this.vars.find(parseEnvVarName(name));
    if (!record) throw new NotFoundError('env_var');
    return toView(record);
  }

  list(query: unknown) {
    return namePage(
      query,
      { max: ENV_VAR_LIMITS.nameLength, pattern: ENV_VAR_NAME_PATTERN },
      (page) => this.vars.list(page),
      toView,
    );
  }

  private audit(actor: Actor, name: string) {
    return { actor: actor.id, action: 'env_var', target: `env_var:${name}` };
  }
}

function toView(v: EnvVarRecord) {
  return {
    name: v.name,
    secret: v.secret,
    value: v.secret ? null : v.value,
    remark: v.remark,
    enabled: v.enabled,
    position: v.position,
    version: v.version,
    createdAt: new Date(v.createdAt).toISOString(),
    updatedAt: new Date(v.updatedAt).toISOString(),
  };
}
