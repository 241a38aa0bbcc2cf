import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeClaimRaceAndFences } from './claim-race-and-fences.contract';
import { describeDispatchContract } from './dispatch.contract';

describeDispatchContract('postgres', postgresDispatchTarget, describeClaimRaceAndFences);
