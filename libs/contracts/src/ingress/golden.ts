/**
 * Helpers of the call files' specs: a refusal's stable rule, or `accepted`. Kept beside the call
 * files so every spec reads refusals the same way.
 */
import { ValidationError } from '@ql/domain';
import { ContractError } from './call';

/** The ContractError rule (`field:rule`) or the ValidationError `field: rule` a reader throws. */
export function refusalOf(read: () => unknown): string {
  try {
    read();
  } catch (error) {
    if (error instanceof ContractError) return error.rule;
    if (error instanceof ValidationError) return `${error.field}: ${error.rule}`;
    throw error;
  }
  return 'accepted';
}
