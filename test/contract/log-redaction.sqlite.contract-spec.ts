import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeLogRedactionContract } from './log-redaction.contract';

describeLogRedactionContract('sqlite', sqliteDispatchTarget);
