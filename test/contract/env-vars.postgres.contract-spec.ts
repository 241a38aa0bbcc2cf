import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeEnvVarsContract } from './env-vars.contract';

describeEnvVarsContract('postgres', postgresDispatchTarget);
