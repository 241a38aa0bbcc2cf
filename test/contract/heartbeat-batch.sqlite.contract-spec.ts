import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeHeartbeatBatchContract } from './heartbeat-batch.contract';

describeHeartbeatBatchContract('sqlite', sqliteDispatchTarget);
