import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeSecretsContract } from './secrets.contract';

describeSecretsContract('postgres', postgresDispatchTarget);
