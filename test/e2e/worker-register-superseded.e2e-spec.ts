/**
 * ADR 0045 §4, with real processes: register refusing a superseded certificate (409
 * `certificate_superseded`) ends the worker's start with exit 7, as the same refusal of a renewal
 * does, not with exit 1 (a supervisor restarts 1). Register sees it when the start's renewal did not
 * rotate the certificate: here a second replica on the same database that issues no certificates
 * (`enrollment_disabled`) takes the worker, whose certificate the first replica had renewed for
 * another key since.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { enrollWorker, issuerEnv, renewCertificate } from '../support/enrolled-worker';
import { FAST_PLANE_ENV, RemoteRunHarness } from '../support/remote-run-harness';
import { TestPlane, startTestPlane } from '../support/test-plane';
import { WORKER_EXIT } from '@ql/contracts';

jest.setTimeout(120_000);

describe('register refuses a superseded certificate: exit 7 (sqlite, two replicas)', () => {
  let h: RemoteRunHarness;
  let noIssuer: TestPlane;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', [], (pki) => issuerEnv(pki));
    noIssuer = await startTestPlane(
      { dialect: 'sqlite', url: h.databaseUrl, dispose: async () => undefined },
      h.pki,
      FAST_PLANE_ENV,
    );
  });
  afterAll(async () => {
    await noIssuer?.close();
    await h?.close();
  });

  it('a worker presenting the certificate its identity had before a renewal elsewhere exits 7 at register, with the code and what to do', async () => {
    const first = await enrollWorker(h.t, 'sup-register');
    const renewed = await renewCertificate(h.t, 'sup-register', first);
    expect(renewed.res.status).toBe(200); // `first` is superseded now
    const dir = h.folder('sup-register');
    mkdirSync(join(dir, 'tls'), { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, 'tls', 'worker.crt'), first.certPem);
    writeFileSync(join(dir, 'tls', 'worker.key'), first.keyPem, { mode: 0o600 });
    const w = h.startWorker('sup-register', {
      env: {
        QL_WORKER_CONTROL_PLANE_URL: noIssuer.plane.ingressUrl,
        QL_WORKER_TLS_CERT: join(dir, 'tls', 'worker.crt'),
        QL_WORKER_TLS_KEY: join(dir, 'tls', 'worker.key'),
      },
    });
    expect(await w.exited).toEqual({ code: WORKER_EXIT.certificateSuperseded, signal: null });
    // The start's renewal was answered "not rotated here"; register then refused the certificate.
    expect(w.messages()).toContain('certificate not renewed: the control plane does not rotate it');
    expect(w.lines.find((l) => l.level === 'error')).toMatchObject({
      loss: 'certificate_superseded',
      code: 'certificate_superseded',
      msg: expect.stringMatching(
        /^worker exiting \(certificate_superseded, exit code 7\): the certificate of sup-register was renewed by another process: .*revoke the worker/,
      ),
    });
    expect(w.session()).toBeUndefined();
  });
});
