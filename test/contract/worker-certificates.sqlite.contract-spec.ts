import { sqliteDispatchTarget } from '../support/dispatch-targets';
import { describeWorkerCertificateContract } from './worker-certificates.contract';

describeWorkerCertificateContract('sqlite', sqliteDispatchTarget);
