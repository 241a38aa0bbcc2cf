/**
 * The worker container's healthcheck (deploy/docker/healthcheck.js) reads QL_WORKER_CONTROL_PLANE_URL
 * as the worker does: one origin or a list (R-WRK-7). Healthy as soon as one replica answers mTLS.
 */
import { LoggedProcess } from '../support/child-process';
import { REPO_ROOT } from '../support/docker-emulation';
import { freePort } from '../support/entry-points';
import { createTestPki } from '../support/test-plane';
import { TlsTestServer, startTlsTestServer } from '../support/tls-test-server';

describe('deploy/docker/healthcheck.js worker', () => {
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let replica: TlsTestServer;

  beforeAll(async () => {
    pki = await createTestPki(['worker-a']);
    replica = await startTlsTestServer(pki, (_req, res) => res.writeHead(404).end());
  });
  afterAll(() => {
    replica?.server.closeAllConnections();
    replica?.server.close();
    pki?.remove();
  });

  const check = async (url: string) => {
    const p = new LoggedProcess(process.execPath, ['deploy/docker/healthcheck.js', 'worker'], {
      cwd: REPO_ROOT,
      env: {
        QL_WORKER_CONTROL_PLANE_URL: url,
        QL_WORKER_TLS_CA: pki.caCertPath,
        QL_WORKER_TLS_CERT: pki.workers['worker-a']!.certPath,
        QL_WORKER_TLS_KEY: pki.workers['worker-a']!.keyPath,
      },
    });
    return { exit: await p.exited, stderr: p.stderr };
  };

  it('is healthy when one replica of the list answers, tried in order', async () => {
    const down = `https://127.0.0.1:${await freePort()}`;
    const result = await check(`${down}, ${replica.origin}`);
    expect(result.exit).toEqual({ code: 0, signal: null });
    expect(result.stderr).toEqual([expect.stringMatching(/^unhealthy: .*ECONNREFUSED/)]);
    expect((await check(replica.origin)).exit).toEqual({ code: 0, signal: null });
  });

  it('is unhealthy when no origin answers, saying why for each', async () => {
    const ports = [await freePort(), await freePort()];
    const result = await check(ports.map((port) => `https://127.0.0.1:${port}`).join(','));
    expect(result.exit).toEqual({ code: 1, signal: null });
    expect(result.stderr).toEqual([
      expect.stringMatching(/^unhealthy: .*ECONNREFUSED/),
      expect.stringMatching(/^unhealthy: .*ECONNREFUSED/),
    ]);
  });
});
