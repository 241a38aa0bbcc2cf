import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeLogRedactionContract } from './log-redaction.contract';

describeLogRedactionContract('postgres', postgresDispatchTarget);
