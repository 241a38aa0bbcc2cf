import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeEnrollmentTokenContract } from './enrollment-tokens.contract';

describeEnrollmentTokenContract('postgres', postgresDispatchTarget);
