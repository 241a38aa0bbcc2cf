import { ArgumentMetadata, Injectable, PipeTransform, Type } from '@nestjs/common';
import { ValidationError as FieldError, ValidatorOptions, validateSync } from './class-validator';
import { ValidationError, outOfRange } from '@ql/domain';
import { dtoFields } from './dto-fields';

/**
 * The first line for request bodies on both listeners (after the strict JSON reader): the body
 * becomes its DTO class and class-validator checks its shape. Unknown fields are refused, never
 * stripped; nested objects and arrays are checked; nothing is converted (a numeric string stays a
 * string and fails @IsInt). The first failure becomes the domain's ValidationError, so both
 * listeners' filters answer in their own shape, naming the field as the domain does
 * (`capabilities.gpus[0].model`). Guards run before pipes: identity is settled first (R-ID-2).
 */
export const EDGE_VALIDATOR_OPTIONS: ValidatorOptions = {
  whitelist: true,
  forbidNonWhitelisted: true,
  forbidUnknownValues: true,
  stopAtFirstError: true,
  validationError: { target: false, value: false },
};

@Injectable()
export class EdgeValidationPipe implements PipeTransform {
  transform(value: unknown, { type, metatype }: ArgumentMetadata): unknown {
    if (type !== 'body') return value;
    // Every body is a DTO: a handler taking `unknown` would skip the edge, so it cannot be served.
    if (!metatype || !dtoFields(metatype)) throw new Error(`@Body() of ${metatype?.name} is not a DTO class`);
    return validateBody(metatype, value);
  }
}

/** A body as its validated DTO instance; no body at all reads as `{}`. */
export function validateBody<T>(type: Type<T>, body: unknown): T {
  const dto = toDto(type, body === undefined ? {} : body, '');
  const errors = validateSync(dto as object, EDGE_VALIDATOR_OPTIONS);
  if (errors.length > 0) throw toDomainError(errors[0]!, '');
  return dto;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * The DTO instance of a JSON object, nested DTOs included. Members are defined, not assigned, and
 * nothing is converted: unlike class-transformer, a `constructor` key is not dropped (it is refused
 * here) and a map member named like an Object method survives to be checked.
 */
function toDto<T>(type: Type<T>, value: unknown, path: string): T {
  if (!isPlainObject(value)) throw new ValidationError(path || 'body', 'must_be_object');
  const fields = dtoFields(type)!;
  const dto = Object.create(type.prototype) as Record<string, unknown>;
  for (const key of Object.keys(value)) {
    // Would make class-validator look up the wrong class; no DTO declares either.
    if (key === 'constructor' || key === '__proto__')
      throw new ValidationError(childPath(path, key), 'unknown_field');
    const nested = fields.get(key);
    let member = value[key];
    if (nested?.array && Array.isArray(member)) {
      const items = member as unknown[];
      member = items.map((item, i) =>
        isPlainObject(item) ? toDto(nested.type(), item, childPath(childPath(path, key), String(i))) : item,
      );
    } else if (nested && !nested.array && isPlainObject(member))
      member = toDto(nested.type(), member, childPath(path, key));
    Object.defineProperty(dto, key, { value: member, enumerable: true, writable: true, configurable: true });
  }
  return dto as T;
}

/** Failures class-validator itself reports, by constraint name; our own carry the rule as message. */
const FRAMEWORK_RULES: Record<string, string> = {
  whitelistValidation: 'unknown_field',
  nestedValidation: 'must_be_object',
  unknownValue: 'must_be_object',
};

function toDomainError(error: FieldError, parent: string): ValidationError {
  const field = childPath(parent, error.property);
  const first = error.constraints && Object.entries(error.constraints)[0];
  if (!first) return toDomainError(error.children![0]!, field);
  const [name, message] = first;
  const framework = FRAMEWORK_RULES[name];
  if (framework) return new ValidationError(field, framework);
  const range = error.contexts?.[name] as { min: number; max: number } | undefined;
  if (message === 'out_of_range' && range) return outOfRange(field, range.min, range.max);
  // `<rule>` or `<rule> <suffix>` (text-rules.ts): the suffix names the item or key.
  const space = message.indexOf(' ');
  return space === -1
    ? new ValidationError(field, message)
    : new ValidationError(field + message.slice(space + 1), message.slice(0, space));
}

/** `a.b`, and `a[0]` for an array index (no DTO declares a numeric property). */
function childPath(parent: string, property: string): string {
  if (/^\d+$/.test(property)) return `${parent}[${property}]`;
  return parent ? `${parent}.${property}` : property;
}
