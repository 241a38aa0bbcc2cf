import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeLeaseModel } from './lease-model.contract';

describeLeaseModel('postgres', postgresDispatchTarget);
