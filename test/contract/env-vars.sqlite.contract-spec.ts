import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeEnvVarsContract } from './env-vars.contract';

describeEnvVarsContract('sqlite', sqliteDispatchTarget);
