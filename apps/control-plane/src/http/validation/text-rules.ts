import { ValidateBy, ValidationOptions } from './class-validator';
import { ValidationError, readString } from '@ql/domain';

/** What one text value must be: the domain's string rules (type, control characters, length, pattern). */
export interface TextRules {
  readonly max: number;
  /** Default 1: empty text is refused unless a field says otherwise. */
  readonly min?: number;
  readonly pattern?: RegExp;
  /** Tab, line feed and carriage return allowed (commands). */
  readonly multiline?: boolean;
  /** Run output: every character but NUL (no lone surrogate), see ADR 0032. */
  readonly output?: boolean;
  /** A name people write: printable Unicode (NFC), `max` in characters, at most `maxBytes` of UTF-8. */
  readonly display?: boolean;
  readonly maxBytes?: number;
}

export interface TextMapRules {
  readonly maxEntries: number;
  readonly key: TextRules;
  readonly value: TextRules;
}

/**
 * A failed custom rule's message is `<rule>` or `<rule> <suffix>`, the suffix naming the offending
 * item or key below the property (`[2]`, `.zone`); rules never hold a space (see edge-validation.pipe).
 */
export const ruleMessage = (rule: string, suffix = ''): string => (suffix ? `${rule} ${suffix}` : rule);

/** The rule `value` breaks, or null: the domain's own string reader decides, so both lines agree. */
export function textRule(value: unknown, rules: TextRules): string | null {
  try {
    readString(value, '', rules);
    return null;
  } catch (error) {
    if (error instanceof ValidationError) return error.rule;
    throw error;
  }
}

function itemsRule(value: unknown, rules: TextRules): string | null {
  // Not an array: @IsArray, which runs first, has refused it.
  if (!Array.isArray(value)) return null;
  for (let i = 0; i < value.length; i++) {
    const rule = textRule(value[i], rules);
    if (rule) return ruleMessage(rule, `[${i}]`);
  }
  return null;
}

function mapRule(value: unknown, rules: TextMapRules): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'must_be_object';
  const keys = Object.keys(value);
  if (keys.length > rules.maxEntries) return 'too_many_items';
  for (const key of keys) {
    const keyRule = textRule(key, rules.key);
    if (keyRule) return ruleMessage(keyRule, '.<key>');
    const valueRule = textRule((value as Record<string, unknown>)[key], rules.value);
    if (valueRule) return ruleMessage(valueRule, `.${key}`);
  }
  return null;
}

/** A class-validator decorator from a function that returns the broken rule's message, or null. */
const ruleDecorator =
  (name: string, broken: (value: unknown) => string | null) =>
  (options?: ValidationOptions): PropertyDecorator =>
    ValidateBy(
      {
        name,
        validator: {
          validate: (value: unknown) => broken(value) === null,
          // Recomputed only for a failure: the success path stays one pass.
          defaultMessage: (args) => broken(args?.value) ?? 'invalid',
        },
      },
      options,
    );

/** One text value (a string property). */
export const IsText = (rules: TextRules, options?: ValidationOptions) =>
  ruleDecorator('isText', (value) => textRule(value, rules))(options);

/** Every item of an array is text by `rules`; the message names the first bad item. */
export const IsTextItems = (rules: TextRules, options?: ValidationOptions) =>
  ruleDecorator('isTextItems', (value) => itemsRule(value, rules))(options);

/** A string → string map (labels, env): its size, every key and every value; the message names the key. */
export const IsTextMap = (rules: TextMapRules, options?: ValidationOptions) =>
  ruleDecorator('isTextMap', (value) => mapRule(value, rules))(options);
