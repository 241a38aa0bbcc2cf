import 'reflect-metadata';
import { Type, applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptions } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  Max,
  Min,
  ValidateIf,
  ValidateNested,
} from './class-validator';
import { IsText, IsTextItems, IsTextMap, TextMapRules, TextRules } from './text-rules';

/**
 * Request DTO fields: each decorator states a field's shape once, for both class-validator (the edge
 * pipe) and @nestjs/swagger (the OpenAPI document), with the domain's limits passed in, never copied.
 * Built-in validators carry the domain's rule name as their message, so errors read as before.
 */

/** `required`; `optional`: may be absent, not null; `nullable`: absent or null. */
export type Presence = 'required' | 'optional' | 'nullable';

export interface FieldOptions {
  readonly presence?: Presence;
  readonly description?: string;
  readonly default?: unknown;
  readonly example?: unknown;
}

/** Nested DTO properties per DTO prototype (null for plain fields): what the edge pipe instantiates. */
const DTO_FIELDS = Symbol('ql:dto-fields');
export interface NestedSpec {
  readonly type: () => Type<unknown>;
  readonly array: boolean;
}
type DtoFields = Map<string, NestedSpec | null>;

const register =
  (nested: NestedSpec | null): PropertyDecorator =>
  (target, key) => {
    const own: DtoFields | undefined = Reflect.getOwnMetadata(DTO_FIELDS, target);
    // A subclass starts from its parent's fields (HeartbeatDto extends SessionFenceDto).
    const fields: DtoFields =
      own ?? new Map(Reflect.getMetadata(DTO_FIELDS, target) as DtoFields | undefined);
    fields.set(String(key), nested);
    if (!own) Reflect.defineMetadata(DTO_FIELDS, fields, target);
  };

export function dtoFields(type: Type<unknown>): DtoFields | undefined {
  return Reflect.getMetadata(DTO_FIELDS, type.prototype) as DtoFields | undefined;
}

function presence(p: Presence): PropertyDecorator[] {
  if (p === 'nullable') return [IsOptional()];
  if (p === 'optional') return [ValidateIf((_object, value) => value !== undefined)];
  return [];
}

function field(
  options: FieldOptions,
  schema: ApiPropertyOptions,
  validators: PropertyDecorator[],
  nested: NestedSpec | null = null,
): PropertyDecorator {
  const p = options.presence ?? 'required';
  const doc = {
    ...schema,
    required: p === 'required',
    ...(p === 'nullable' ? { nullable: true } : {}),
    ...(options.description ? { description: options.description } : {}),
    ...(options.default !== undefined ? { default: options.default } : {}),
    ...(options.example !== undefined ? { example: options.example } : {}),
  } as ApiPropertyOptions;
  return applyDecorators(register(nested), ApiProperty(doc), ...presence(p), ...validators);
}

const textSchema = (rules: TextRules) => ({
  type: 'string' as const,
  minLength: rules.min ?? 1,
  maxLength: rules.max,
  ...(rules.pattern ? { pattern: rules.pattern.source } : {}),
});

/** A JSON integer in [min, max]: a numeric string is refused, never converted. */
export const IntField = (min: number, max: number, options: FieldOptions = {}) =>
  field(options, { type: 'integer', minimum: min, maximum: max }, [
    IsInt({ message: 'must_be_integer' }),
    Min(min, { message: 'out_of_range', context: { min, max } }),
    Max(max, { message: 'out_of_range', context: { min, max } }),
  ]);

/** A JSON `true` or `false`: a string is refused, never converted. */
export const BoolField = (options: FieldOptions = {}) =>
  field(options, { type: 'boolean' }, [IsBoolean({ message: 'must_be_boolean' })]);

export const TextField = (rules: TextRules, options: FieldOptions = {}) =>
  field(options, textSchema(rules), [IsText(rules)]);

export const EnumField = (values: readonly string[], options: FieldOptions = {}) =>
  field(options, { type: 'string', enum: [...values] }, [
    IsIn([...values], { message: `must_be_one_of:${values.join('|')}` }),
  ]);

/** An array of text items, at most `maxItems`; `unique` documents that the domain refuses duplicates. */
export const TextListField = (
  rules: TextRules & { readonly maxItems: number; readonly unique?: boolean },
  options: FieldOptions = {},
) =>
  field(
    options,
    {
      type: 'array',
      items: textSchema(rules),
      maxItems: rules.maxItems,
      ...(rules.unique ? { uniqueItems: true } : {}),
    } as ApiPropertyOptions,
    [
      IsArray({ message: 'must_be_array' }),
      ArrayMaxSize(rules.maxItems, { message: 'too_many_items' }),
      IsTextItems(rules),
    ],
  );

/** A string → string map (labels, env). */
export const TextMapField = (rules: TextMapRules, options: FieldOptions = {}) =>
  field(
    options,
    {
      type: 'object',
      maxProperties: rules.maxEntries,
      propertyNames: textSchema(rules.key),
      additionalProperties: textSchema(rules.value),
    } as ApiPropertyOptions,
    [IsTextMap(rules)],
  );

/** A nested DTO, or with `maxItems` an array of them; unknown fields inside are refused too. */
export function NestedField(
  type: () => Type<unknown>,
  options: FieldOptions & { readonly maxItems?: number } = {},
): PropertyDecorator {
  const array = options.maxItems !== undefined;
  const shape = array
    ? [IsArray({ message: 'must_be_array' }), ArrayMaxSize(options.maxItems!, { message: 'too_many_items' })]
    : [IsObject({ message: 'must_be_object' })];
  return field(
    options,
    // @nestjs/swagger knows a lazy type by its name, `type`, which only an arrow written as `type:` gets.
    array ? { type: () => type(), isArray: true, maxItems: options.maxItems } : { type: () => type() },
    [...shape, ValidateNested({ each: array })],
    { type, array },
  );
}
