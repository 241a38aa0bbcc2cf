import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeLeaseModel } from './lease-model.contract';

describeLeaseModel('sqlite', sqliteDispatchTarget);
