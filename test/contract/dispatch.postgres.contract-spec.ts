import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeClaimBatch, describeClaimBatchFallback } from './claim-batch.contract';
import { describeClaimCost } from './claim-cost.contract';
import { describeClaimPlans } from './claim-plans.contract';
import { describeClaimOneStatementWindows } from './claim-one-statement-windows.contract';
import { describeClaimPreferredPlacement } from './claim-preferred-placement.contract';
import { describeClaimRaceAndFences } from './claim-race-and-fences.contract';
import { describeDispatchContract } from './dispatch.contract';
import { describeRunsByWorker } from './runs-by-worker.contract';

describeDispatchContract(
  'postgres',
  postgresDispatchTarget,
  describeClaimRaceAndFences,
  describeClaimPreferredPlacement,
  describeClaimCost,
  describeClaimPlans,
  describeClaimBatch,
  describeClaimBatchFallback,
  describeClaimOneStatementWindows,
  describeRunsByWorker,
);
