import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeFastCompletionContract } from './fast-completion.contract';

describeFastCompletionContract('postgres', postgresDispatchTarget);
