import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeBundlesContract } from './bundles.contract';

describeBundlesContract('postgres', postgresDispatchTarget);
