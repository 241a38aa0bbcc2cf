import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeHeartbeatBatchContract } from './heartbeat-batch.contract';

describeHeartbeatBatchContract('postgres', postgresDispatchTarget);
