import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeLogStreamsContract } from './log-streams.contract';

describeLogStreamsContract('sqlite', sqliteDispatchTarget);
