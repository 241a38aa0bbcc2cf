/**
 * What the four activation calls share (`starting`, `running`, `start-failure`, `completion`; R-ACT-1..3,
 * R-CMP-1): the lease fence first, the step's own fields after it, and the activation answer.
 */
import { IngressCall, KiB, Refusal } from './call';
import {
  ACTIVATION_ANSWER_SINCE,
  RUN_ACTIVATION_MAX_BYTES,
  RUN_ACTIVATION_SCHEMA,
} from './activation-answer';

/** The descriptor of an activation call: its own fields' versions on top of the answer's. */
export function activationCall<A extends 'starting' | 'running' | 'start-failure' | 'completion'>(
  action: A,
  fields: {
    readonly bodyLimit?: number;
    readonly since?: IngressCall['since'];
    readonly refusals?: readonly Refusal[];
  } = {},
): IngressCall<A> {
  return {
    action,
    bodyLimit: fields.bodyLimit ?? 4 * KiB,
    answerLimit: RUN_ACTIVATION_MAX_BYTES,
    schema: RUN_ACTIVATION_SCHEMA,
    firstReleased: 'bb721f9',
    since: { ...ACTIVATION_ANSWER_SINCE, ...fields.since },
    refusals: fields.refusals ?? [],
  };
}
