import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeDispatchContract } from './dispatch.contract';

describeDispatchContract('sqlite', sqliteDispatchTarget);
