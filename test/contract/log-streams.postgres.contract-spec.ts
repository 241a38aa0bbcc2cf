import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeLogStreamsContract } from './log-streams.contract';

describeLogStreamsContract('postgres', postgresDispatchTarget);
