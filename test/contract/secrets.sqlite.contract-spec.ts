import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeSecretsContract } from './secrets.contract';

describeSecretsContract('sqlite', sqliteDispatchTarget);
