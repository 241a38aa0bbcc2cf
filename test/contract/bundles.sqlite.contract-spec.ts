import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeBundlesContract } from './bundles.contract';

describeBundlesContract('sqlite', sqliteDispatchTarget);
