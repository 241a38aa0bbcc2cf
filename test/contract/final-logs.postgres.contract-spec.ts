import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeFinalLogsContract } from './final-logs.contract';

describeFinalLogsContract('postgres', postgresDispatchTarget);
