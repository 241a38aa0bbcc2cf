import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeActivationContract } from './activation.contract';

describeActivationContract('sqlite', sqliteDispatchTarget);
