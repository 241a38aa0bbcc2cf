import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeFinalLogsContract } from './final-logs.contract';

describeFinalLogsContract('sqlite', sqliteDispatchTarget);
