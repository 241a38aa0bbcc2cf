import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeEnrollmentTokenContract } from './enrollment-tokens.contract';

describeEnrollmentTokenContract('sqlite', sqliteDispatchTarget);
