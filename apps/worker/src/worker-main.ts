import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import {
  checkEntryArgs,
  guardStdio,
  isHelpFlag,
  WORKER_DISABLED_REASON,
  WORKER_EXIT,
  writeErr,
  writeOut,
} from '@ql/contracts';
import { WorkerConfig, WorkerConfigError, loadWorkerConfig, workerConfigTable } from './config/worker-config';
import { checkRunAs, resolveRunAs } from './executor/run-as';
import { LocalProcessExecutor } from './executor/local-process.executor';
import { containmentLine } from './host/cgroup';
import {
  CertificateKeeper,
  ENROLLMENT_OF_DISABLED,
  IdentityLostError,
  identityLossOf,
  revokedLoss,
} from './identity/certificate-keeper';
import { IngressCallError } from './ingress-client/worker-ingress-https.client';
import { JOURNAL_USAGE, journalCommand } from './journal/journal-command';
import { JournalLockedError } from './journal/journal-lock';
import { ProtocolUnsupported, WorkerLifecycleService } from './lifecycle/worker-lifecycle.service';
import { JsonLineLog, NestJsonLogger, WorkerLog } from './logging/worker-log';
import { WorkerModule } from './worker.module';
import { WORKER_CERTIFICATE } from './worker.tokens';

/**
 * `npm run start:worker`: the headless worker (QL_PROFILE=worker), started by bin/ql-worker (ADR 0046).
 * `… main.js journal list|resolve`: the operator's journal command (journal/journal-command.ts), with
 * the worker's environment.
 */
const USAGE = `usage: npm run start:worker   (QL_PROFILE=worker bin/ql-worker: node with the V8 flags of
                              QL_WORKER_MACHINE_CLASS, then the worker bundled in one file,
                              dist/apps/worker/bundle/main.js)
       node dist/apps/worker/src/main.js --config-docs
       node dist/apps/worker/src/main.js journal list | resolve <offer id> | resolve --all
Starts the headless worker: it registers with QL_WORKER_CONTROL_PLANE_URL over mTLS, pulls runs and
runs them. Settings are QL_WORKER_* environment variables (--config-docs prints their table).
SIGTERM, SIGINT or SIGHUP (the terminal closed): drain, go offline, exit 0; a second signal exits
at once. "journal …" clears the records of a worker that needs recovery (journal --help).`;

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args[0] === 'journal' && args.some(isHelpFlag)) {
    writeOut(`${JOURNAL_USAGE}\n`);
    return WORKER_EXIT.ok;
  }
  if (args[0] !== 'journal') {
    const usage = checkEntryArgs(args, USAGE, (arg) => arg === '--config-docs');
    if (usage !== undefined) return usage;
  }
  guardStdio();
  if (args.includes('--config-docs')) {
    writeOut(`${workerConfigTable()}\n`);
    return WORKER_EXIT.ok;
  }
  if (process.env.QL_PROFILE !== 'worker') {
    writeErr(
      `refusing to start the worker: QL_PROFILE is ${process.env.QL_PROFILE === undefined ? 'unset' : `"${process.env.QL_PROFILE}"`}; ` +
        'set QL_PROFILE=worker (npm run start:worker does)\n',
    );
    return WORKER_EXIT.config;
  }
  let config: WorkerConfig;
  let runAs: string | null;
  try {
    config = loadWorkerConfig(process.env);
    runAs = await checkTaskUser(config);
  } catch (error) {
    if (!(error instanceof WorkerConfigError)) throw error;
    writeErr(`worker configuration error: ${error.message}\n`);
    return WORKER_EXIT.config;
  }
  if (process.argv[2] === 'journal') {
    return journalCommand(process.argv.slice(3), config, {
      out: (line) => writeOut(`${line}\n`),
      err: (line) => writeErr(`${line}\n`),
    });
  }
  const log = new JsonLineLog(config.logLevel, undefined, { workerId: config.workerId });
  log.info('worker starting', {
    controlPlanes: config.controlPlaneOrigins,
    maxConcurrentRuns: config.maxConcurrentRuns,
    heartbeatMs: config.heartbeatMs,
    stopBudgetMs: config.stopBudgetMs,
    labelCount: Object.keys(config.labels).length,
    runAs,
  });
  if (runAs === null) {
    log.warn(
      "tasks run as the worker's own user: a task can read its TLS key, journal and environment and act as this worker; set QL_WORKER_RUN_AS (docs/operations.md)",
    );
  }
  const releaseProcess = holdProcessOpen();
  const signal = firstSignal(log);
  const app = await NestFactory.createApplicationContext(WorkerModule.forProfile(process.env.QL_PROFILE), {
    logger: new NestJsonLogger(log),
    abortOnError: false,
  });
  // The module read its settings: nothing the worker starts later needs to see the token (ADR 0045 §2).
  delete process.env.QL_WORKER_ENROLL_TOKEN;
  try {
    const lifecycle = app.get(WorkerLifecycleService);
    const certificate = app.get<CertificateKeeper>(WORKER_CERTIFICATE);
    /** The exit of a lost identity; a revoked certificate is put aside first, so no start takes it for usable. */
    const endFor = (loss: IdentityLostError): number => {
      if (loss.loss === 'certificate_revoked') certificate.retireRevoked();
      log.error(lossMessage(config.workerId, loss), { loss: loss.loss, code: loss.code });
      return exitOf(loss);
    };
    const containment = containmentLine(app.get(LocalProcessExecutor).containment());
    log[containment.level](containment.msg, containment.fields);
    try {
      // A stop signal while it registers (the control plane may be unreachable for a while) ends the start.
      void signal.then(() => lifecycle.cancelStart());
      await lifecycle.start();
    } catch (error) {
      if (lifecycle.startCancelled) {
        log.info('worker stopped before it registered');
        return WORKER_EXIT.ok;
      }
      if (error instanceof JournalLockedError) {
        log.error('worker refused to start: its journal folder is in use', describe(error));
        return WORKER_EXIT.journalLocked;
      }
      const loss = identityLossOf(config.workerId, error, certificate.revokedPath);
      if (loss) return endFor(loss);
      if (error instanceof ProtocolUnsupported) {
        log.error(
          `worker exiting: ${error.message}; restarting will not help: upgrade the worker or the control plane (exit code ${WORKER_EXIT.protocolUnsupported})`,
          { speaks: error.speaks },
        );
        return WORKER_EXIT.protocolUnsupported;
      }
      if (error instanceof IngressCallError && error.reason === WORKER_DISABLED_REASON) {
        log.error(disabledMessage(config.workerId, 'its registration was refused'), describe(error));
        return WORKER_EXIT.disabled;
      }
      log.error('worker failed to start', describe(error));
      return WORKER_EXIT.failed;
    }
    const outcome = await Promise.race([
      signal.then((name) => ({ kind: 'signal' as const, name })),
      lifecycle.whenFenced().then((event) => ({ kind: 'fenced' as const, event })),
      certificate.whenLost().then((error) => ({ kind: 'identity' as const, error })),
    ]);
    if (outcome.kind === 'identity') {
      // The session still holds (a superseded certificate keeps serving it): drain and go offline first.
      await lifecycle.stop().catch(() => undefined);
      return endFor(outcome.error);
    }
    // Every call refused since: pulling stopped, runs ended, session left to expire (ADR 0055).
    if (outcome.kind === 'fenced' && outcome.event.code === 'certificate_revoked')
      return endFor(revokedLoss(config.workerId, certificate.revokedPath, outcome.event.action));
    if (outcome.kind === 'fenced' && outcome.event.reason === WORKER_DISABLED_REASON) {
      log.error(disabledMessage(config.workerId, 'its session was fenced'), { ...outcome.event });
      return WORKER_EXIT.disabled;
    }
    if (outcome.kind === 'fenced') {
      log.error('worker exiting: its session was fenced by the control plane; not re-registering', {
        ...outcome.event,
      });
      return WORKER_EXIT.fenced;
    }
    log.info('worker stopping', { signal: outcome.name });
    try {
      await lifecycle.stop();
    } catch (error) {
      log.error(
        `worker stop failed: ${error instanceof Error ? error.message : String(error)}`,
        describe(error),
      );
      return WORKER_EXIT.failed;
    }
    log.info('worker stopped');
    return WORKER_EXIT.ok;
  } finally {
    await app.close();
    releaseProcess();
  }
}

/** ADR 0035: what a disabled worker says on its way out (exit 5), naming the step that brings it back. */
function disabledMessage(workerId: string, what: string): string {
  return (
    `worker exiting: an operator disabled ${workerId} (${what}); restarting will not help: ` +
    `POST /api/v1/workers/${workerId}/enable, then start the worker again (exit code ${WORKER_EXIT.disabled})`
  );
}

/** ADR 0045, 0055: the exit code of an identity the worker lost (6–8, 11; 5 disabled; 1 any other refusal). */
function exitOf(error: IdentityLostError): number {
  switch (error.loss) {
    case 'certificate_expired':
      return WORKER_EXIT.certificateExpired;
    case 'certificate_superseded':
      return WORKER_EXIT.certificateSuperseded;
    case 'enrollment_refused':
      return WORKER_EXIT.enrollmentRefused;
    case 'worker_disabled':
      return WORKER_EXIT.disabled;
    case 'certificate_revoked':
      return WORKER_EXIT.certificateRevoked;
    default:
      return WORKER_EXIT.failed;
  }
}

function lossMessage(workerId: string, error: IdentityLostError): string {
  if (error.loss === 'worker_disabled')
    return disabledMessage(
      workerId,
      error.message === ENROLLMENT_OF_DISABLED ? error.message : 'its certificate renewal was refused',
    );
  return `worker exiting (${error.loss}, exit code ${exitOf(error)}): ${error.message}`;
}

/** QL_WORKER_RUN_AS resolved and proven to work (ADR 0031): `uid:gid (label)`, or null when unset. */
async function checkTaskUser(config: WorkerConfig): Promise<string | null> {
  if (!config.runAs) return null;
  const ids = resolveRunAs(config.runAs);
  await checkRunAs(ids, config.workDir, config.tlsKeyPath, config.enrollTokenFile);
  return `${ids.uid}:${ids.gid} (${ids.label})`;
}

/**
 * The heartbeat timer and the idle keep-alive socket are unref'd by design, so the entry point
 * alone keeps the process alive until it decides to exit. One timer, re-armed every ~24.8 days.
 */
function holdProcessOpen(): () => void {
  let timer: NodeJS.Timeout;
  const arm = () => {
    timer = setTimeout(arm, 2 ** 31 - 1);
  };
  arm();
  return () => clearTimeout(timer);
}

/**
 * Resolves on the first SIGTERM/SIGINT/SIGHUP (a closed terminal: drain and stop like Ctrl-C); a
 * second one means "now": exit non-zero at once.
 */
function firstSignal(log: WorkerLog): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = false;
    const on = (name: NodeJS.Signals) => {
      if (received) {
        log.error('second signal during stop: exiting without finishing drain/offline', { signal: name });
        process.exit(WORKER_EXIT.failed);
      }
      received = true;
      resolve(name);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
    process.on('SIGHUP', on);
  });
}

function describe(error: unknown): Record<string, string | number | undefined> {
  if (error instanceof IngressCallError) {
    return { error: error.message, status: error.status, code: error.code, reason: error.reason };
  }
  return { error: error instanceof Error ? error.message : String(error) };
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    writeErr(`worker failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(WORKER_EXIT.failed);
  },
);
