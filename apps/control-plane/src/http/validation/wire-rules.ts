import { CAPABILITY_LIMITS, LABEL_KEY_PATTERN, TOKEN_PATTERN } from '@ql/domain';
import { TextMapRules, TextRules } from './text-rules';

/** Text rules several DTOs share, all from the domain's limits. */

/** Architecture, OS, executor, runtime, vendor and feature names. */
export const TOKEN: TextRules = { max: CAPABILITY_LIMITS.tokenLength, pattern: TOKEN_PATTERN };
export const LABEL_KEY: TextRules = { max: CAPABILITY_LIMITS.labelKeyLength, pattern: LABEL_KEY_PATTERN };
export const LABEL_VALUE: TextRules = { max: CAPABILITY_LIMITS.labelValueLength, min: 0 };

export const labelMap = (maxEntries: number): TextMapRules => ({
  maxEntries,
  key: LABEL_KEY,
  value: LABEL_VALUE,
});

export const tokenSet = (maxItems: number) => ({ ...TOKEN, maxItems, unique: true });
