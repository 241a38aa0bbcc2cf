import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeClaimBatch } from './claim-batch.contract';
import { describeClaimCost } from './claim-cost.contract';
import { describeClaimPreferredPlacement } from './claim-preferred-placement.contract';
import { describeClaimRaceAndFences } from './claim-race-and-fences.contract';
import { describeDispatchContract } from './dispatch.contract';
import { describeRunsByWorker } from './runs-by-worker.contract';

describeDispatchContract(
  'sqlite',
  sqliteDispatchTarget,
  describeClaimRaceAndFences,
  describeClaimPreferredPlacement,
  describeClaimCost,
  describeClaimBatch,
  describeRunsByWorker,
);
