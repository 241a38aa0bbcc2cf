import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeConsoleSessionContract } from './console-sessions.contract';

describeConsoleSessionContract('postgres', postgresDispatchTarget);
