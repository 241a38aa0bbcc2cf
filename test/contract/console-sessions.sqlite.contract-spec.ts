import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeConsoleSessionContract } from './console-sessions.contract';

describeConsoleSessionContract('sqlite', sqliteDispatchTarget);
