/**
 * The worker's side of enrollment and rotation (issue 18, ADR 0045), with real worker processes, a
 * real control plane and real TLS: a worker joins with only a token and the CA, lives through
 * rotations without losing its session or a run, cannot rotate once revoked or disabled, exits 6 with
 * an expired certificate, and a copy of its files on a second "machine" ends in `certificate_superseded`
 * (exit 7) for whichever of the two comes second.
 *
 * SQLite only: what is under test is the worker processes (their files, exit codes, restarts); the
 * enrollment and renewal rules in the database are proven on both dialects by the contract suite and
 * by enrollment-tokens.e2e-spec.ts (the admin and ingress API on SQLite and PostgreSQL).
 */
import { createPublicKey, X509Certificate } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { INGRESS_ENROLL_PATH, WORKER_EXIT } from '@ql/contracts';
import { makeCsr } from '../support/csr';
import {
  WorkerMachine,
  enrollingHarness,
  newEnrollmentToken,
  startOnMachine,
  workerMachine,
} from '../support/enrolled-worker';
import { RemoteRunHarness, RunWorker, eventually } from '../support/remote-run-harness';
import { Dialect, TRUST_DOMAIN } from '../support/test-plane';
import {
  acceptCsr,
  signWorkerCertificate,
} from '../../apps/control-plane/src/enrollment/worker-certificate-signer';
import { WorkerIssuer } from '../../apps/control-plane/src/enrollment/worker-issuer';

jest.setTimeout(240_000);

describe.each<Dialect>(['sqlite'])(
  'worker enrollment and rotation, processes (%s)',
  (dialect) => {
    let h: RemoteRunHarness;

    beforeAll(async () => {
      h = await enrollingHarness(dialect, ['hand-made']);
    });
    afterAll(async () => {
      await h?.close();
    });

    const token = (workerId: string) => newEnrollmentToken(h.t, workerId);
    const machine = (name: string) => workerMachine(h, name);
    type Machine = WorkerMachine;
    const start = (workerId: string, m: Machine, env: Record<string, string> = {}) =>
      startOnMachine(h, workerId, m, env);
    const renewals = (w: RunWorker) => w.lines.filter((l) => l.msg === 'worker certificate renewed').length;
    const fingerprintOf = (path: string) =>
      new X509Certificate(readFileSync(path)).fingerprint256.replaceAll(':', '').toLowerCase();
    const forks = async () => {
      const text = (await h.t.admin('GET', '/metrics', undefined, h.t.viewerToken)).raw;
      return Number(/^ql_worker_certificate_forks_total (\d+)$/m.exec(text)?.[1] ?? 'NaN');
    };
    const exitCode = async (w: RunWorker) => (await w.exited).code;
    /** A certificate the dev issuer signed for `workerId` that expired a minute ago. */
    const expiredCertificate = async (workerId: string) => {
      const ttlMs = 300_000;
      const issuer = WorkerIssuer.load(
        {
          workerIssuerCertPath: h.pki.workerIssuerCertPath,
          workerIssuerKeyPath: h.pki.workerIssuerKeyPath,
          workerIssuerKeyPem: '',
          workerCertTtlMs: ttlMs,
          trustDomain: TRUST_DOMAIN,
        },
        new Date(),
      )!;
      const { csrPem, keyPem } = await makeCsr();
      const csr = await acceptCsr(csrPem, workerId, TRUST_DOMAIN);
      const issued = await signWorkerCertificate(issuer, csr, Date.now() - ttlMs - 60_000);
      return { certPem: issued.certificatePem + issuer.chainPem, keyPem };
    };

    it('joins with only a token and the CA: its own 0600 key, never sent; then runs a task', async () => {
      const m = machine('join');
      const secret = await token('enr-join');
      const w = start('enr-join', m, { QL_WORKER_ENROLL_TOKEN: secret });
      await h.untilOnline(w);
      expect(statSync(m.key).mode & 0o777).toBe(0o600);
      expect(existsSync(`${m.key}.pending`)).toBe(false);
      // The control plane holds the certificate over the worker's own public key, and nothing else of it.
      const stored = await h.t.plane.core.repositories.workerCertificates.find(fingerprintOf(m.cert));
      expect(stored).toMatchObject({ workerId: 'enr-join' });
      const publicKey = createPublicKey(readFileSync(m.key)).export({ type: 'spki', format: 'der' });
      expect(
        new X509Certificate(readFileSync(m.cert)).publicKey.export({ type: 'spki', format: 'der' }),
      ).toEqual(publicKey);
      expect(w.transcript()).not.toContain(secret);
      // Register recorded the certificate the session came with (ADR 0045 §4), shown in the admin view.
      const detail = (await h.t.admin('GET', '/api/v1/workers/enr-join')).body as {
        certificateFingerprint: string;
      };
      expect(detail.certificateFingerprint).toBe(fingerprintOf(m.cert));
      const runId = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo joined' }));
      expect((await h.untilRunEnds(runId)).status).toBe('succeeded');
      expect(await h.output(runId)).toBe('joined\n');
      w.kill('SIGTERM');
      expect(await exitCode(w)).toBe(WORKER_EXIT.ok);
    });

    it('a lost enrollment answer: the restarted worker sends its pending key again and gets the certificate issued for it', async () => {
      const m = machine('lost-answer');
      const secret = await token('enr-lost');
      // The first start's request reached the control plane, its answer did not: the key is on disk as
      // `<key>.pending` (written before the call), the certificate only in the control plane.
      const { csrPem, keyPem } = await makeCsr();
      mkdirSync(join(m.dir, 'tls'), { recursive: true, mode: 0o700 });
      writeFileSync(`${m.key}.pending`, keyPem, { mode: 0o600 });
      const first = await h.t.ingress(null, INGRESS_ENROLL_PATH, {
        workerId: 'enr-lost',
        token: secret,
        csr: csrPem,
      });
      expect(first.status).toBe(200);
      const issued = (first.body as { fingerprint: string }).fingerprint;

      const w = start('enr-lost', m, { QL_WORKER_ENROLL_TOKEN: secret });
      await h.untilOnline(w);
      expect(fingerprintOf(m.cert)).toBe(issued);
      expect(existsSync(`${m.key}.pending`)).toBe(false);
      expect((await h.t.plane.core.repositories.workerCertificates.current('enr-lost'))?.fingerprint).toBe(
        issued,
      );
      w.kill('SIGTERM');
      expect(await exitCode(w)).toBe(WORKER_EXIT.ok);
    });

    it('lives through three rotations without losing its session or a run that spans them', async () => {
      const m = machine('rotate');
      const markers = h.folder('rotate-markers');
      mkdirSync(markers, { recursive: true });
      const w = start('enr-rotate', m, {
        QL_WORKER_ENROLL_TOKEN: await token('enr-rotate'),
        QL_WORKER_CERT_RENEW_AT_PERCENT: '1', // ~3 s of a 5 min certificate
      });
      const online = await h.untilOnline(w);
      const started = join(markers, 'started');
      const release = join(markers, 'release');
      const command = `echo "$QL_ATTEMPT_ID" >> ${started}; while [ ! -f ${release} ]; do sleep 0.1; done; echo done`;
      const runId = await h.trigger(await h.createTask({ runtime: 'shell', command, timeoutMs: 180_000 }));
      await eventually('the run started', () => (existsSync(started) ? true : undefined));
      const before = renewals(w);
      const fingerprints = new Set([fingerprintOf(m.cert)]);
      await w.until(
        'three rotations during the run',
        async () => {
          fingerprints.add(fingerprintOf(m.cert));
          return renewals(w) >= before + 3 ? true : undefined;
        },
        { deadlineMs: 120_000, pollMs: 200 },
      );
      writeFileSync(release, '');
      const run = await h.untilRunEnds(runId);
      expect({ status: run.status, attempts: run.attempts.length }).toEqual({
        status: 'succeeded',
        attempts: 1,
      });
      expect(readFileSync(started, 'utf8').trim().split('\n')).toHaveLength(1);
      expect(fingerprints.size).toBeGreaterThanOrEqual(3);
      const view = await h.worker('enr-rotate');
      expect({ session: view?.sessionId, status: view?.status }).toEqual({
        session: online.sessionId,
        status: 'online',
      });
      expect(w.messages()).not.toContain('worker session fenced; stopping without re-registering');
      w.kill('SIGTERM');
      expect(await exitCode(w)).toBe(WORKER_EXIT.ok);
    });

    /** A worker enrolled, online once and stopped; then `admin` is done to it and it starts again. */
    const restartAfter = async (id: string, admin: 'disable' | 'revoke') => {
      const m = machine(id);
      const first = start(id, m, { QL_WORKER_ENROLL_TOKEN: await token(id) });
      await h.untilOnline(first);
      first.kill('SIGTERM');
      expect(await exitCode(first)).toBe(WORKER_EXIT.ok);
      const held = fingerprintOf(m.cert);
      expect((await h.t.admin('POST', `/api/v1/workers/${id}/${admin}`, {})).status).toBe(200);
      const again = start(id, m);
      return { m, held, again, code: await exitCode(again) };
    };

    it('a disabled worker cannot rotate: exit 5, no certificate issued', async () => {
      const { m, held, again, code } = await restartAfter('enr-off', 'disable');
      expect(code).toBe(WORKER_EXIT.disabled);
      expect(again.transcript()).toContain('its certificate renewal was refused');
      expect(fingerprintOf(m.cert)).toBe(held);
      expect(existsSync(`${m.key}.pending`)).toBe(true); // never answered: the next start replays it
    });

    it('a disabled worker is refused enrollment on a new machine too: exit 5, no certificate written', async () => {
      const { code } = await restartAfter('enr-off2', 'disable');
      expect(code).toBe(WORKER_EXIT.disabled);
      const fresh = machine('enr-off2-new');
      const w = start('enr-off2', fresh, { QL_WORKER_ENROLL_TOKEN: await token('enr-off2') });
      expect(await exitCode(w)).toBe(WORKER_EXIT.disabled);
      expect(w.transcript()).toContain('an operator disabled enr-off2 (its enrollment was refused)');
      expect(existsSync(fresh.cert)).toBe(false);
    });

    it('a revoked worker cannot rotate: exit 11, no certificate issued, the revoked one put aside', async () => {
      const { m, held, again, code } = await restartAfter('enr-rev', 'revoke');
      expect(code).toBe(WORKER_EXIT.certificateRevoked);
      expect(again.transcript()).toContain('has been revoked');
      expect(existsSync(m.cert)).toBe(false);
      expect(fingerprintOf(`${m.cert}.revoked`)).toBe(held);
    });

    it('an expired certificate exits 6 and says to enroll again; a new token brings it back', async () => {
      const m = machine('expired');
      mkdirSync(join(m.dir, 'tls'), { recursive: true });
      const expired = await expiredCertificate('enr-old');
      writeFileSync(m.cert, expired.certPem, { mode: 0o600 });
      writeFileSync(m.key, expired.keyPem, { mode: 0o600 });
      const w = start('enr-old', m);
      expect(await exitCode(w)).toBe(WORKER_EXIT.certificateExpired);
      expect(w.transcript()).toMatch(/expired at .* enroll again with a new token/);
      const back = start('enr-old', m, { QL_WORKER_ENROLL_TOKEN: await token('enr-old') });
      await h.untilOnline(back);
      expect(new Date(new X509Certificate(readFileSync(m.cert)).validTo).getTime()).toBeGreaterThan(
        Date.now(),
      );
      back.kill('SIGTERM');
      expect(await exitCode(back)).toBe(WORKER_EXIT.ok);
    });

    it.each([
      ['the copy starts first: the real worker gets certificate_superseded', 'copy-first'],
      ['the real worker restarts first: the copy gets certificate_superseded', 'real-first'],
    ])('a second machine with a copy of the files: %s', async (_what, order) => {
      const id = `enr-${order}`;
      const real = machine(`${order}-real`);
      const copy = machine(`${order}-copy`);
      const w = start(id, real, { QL_WORKER_ENROLL_TOKEN: await token(id) });
      await h.untilOnline(w);
      mkdirSync(join(copy.dir, 'tls'), { recursive: true });
      copyFileSync(real.cert, copy.cert);
      copyFileSync(real.key, copy.key);
      const forksBefore = await forks();
      let second: RunWorker;
      let loser: RunWorker;
      if (order === 'copy-first') {
        second = start(id, copy);
        await h.untilOnline(second);
        await exitCode(w); // fenced by the copy's session (3), or refused first (7)
        loser = start(id, real); // the real machine starts again: its certificate was superseded
      } else {
        w.kill('SIGTERM');
        await exitCode(w);
        second = start(id, real); // renews: the copy's certificate is superseded
        await h.untilOnline(second);
        loser = start(id, copy);
      }
      expect(await exitCode(loser)).toBe(WORKER_EXIT.certificateSuperseded);
      expect(loser.transcript()).toContain('used from another machine');
      expect(await forks()).toBeGreaterThan(forksBefore);
      const audit = await h.t.plane.core.repositories.audit.list(50);
      expect(audit.some((a) => a.action === 'worker.certificate_fork' && a.target.includes(id))).toBe(true);
      expect((await h.worker(id))?.sessionId).toBe(second.session());
      second.kill('SIGTERM');
      expect(await exitCode(second)).toBe(WORKER_EXIT.ok);
    });
  },
);
