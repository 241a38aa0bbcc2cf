import { postgresDispatchTarget } from '../support/dispatch-targets';
import { describeWorkerCertificateContract } from './worker-certificates.contract';

describeWorkerCertificateContract('postgres', postgresDispatchTarget);
