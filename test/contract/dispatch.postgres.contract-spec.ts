import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeDispatchContract } from './dispatch.contract';

describeDispatchContract('postgres', postgresDispatchTarget);
