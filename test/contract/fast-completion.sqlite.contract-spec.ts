import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeFastCompletionContract } from './fast-completion.contract';

describeFastCompletionContract('sqlite', sqliteDispatchTarget);
