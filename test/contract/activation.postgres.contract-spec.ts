import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeActivationContract } from './activation.contract';

describeActivationContract('postgres', postgresDispatchTarget);
