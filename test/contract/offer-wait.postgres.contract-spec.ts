import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeOfferWaitContract } from './offer-wait.contract';

describeOfferWaitContract('postgres', postgresDispatchTarget);
