import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeOfferWaitContract } from './offer-wait.contract';

describeOfferWaitContract('sqlite', sqliteDispatchTarget);
