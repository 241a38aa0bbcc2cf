import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { IncomingHttpHeaders, get } from 'node:http';
import { ROOT, tempDir } from '../support/entry-points';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

/** The console's files on the admin listener (ADR 0052): only three names, strict headers, gzip. */
describe('console pages (sqlite)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let built: TestPlane;
  let unbuilt: TestPlane;

  beforeAll(async () => {
    const dir = join(tempDir('ql-console-pages-'), 'console');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.js'), dir]);
    db = await createTestDatabase('sqlite');
    pki = await createTestPki([]);
    built = await startTestPlane(db, pki, { QL_CONSOLE_DIR: dir });
    unbuilt = await startTestPlane(db, pki, { QL_CONSOLE_DIR: join(dir, 'missing') });
  });
  afterAll(async () => {
    await built?.close();
    await unbuilt?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** A plain HTTP GET (no client-side decompression), with its bytes as sent. */
  const fetch = (t: TestPlane, path: string, gzip = false) =>
    new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const { hostname, port } = new URL(t.plane.adminUrl);
      // The path goes out as written (a URL object would resolve `%2e%2e` before sending).
      const req = get(
        { hostname, port, path, headers: { 'accept-encoding': gzip ? 'gzip' : 'identity' } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
    });

  it('serves the page without credentials, with a strict CSP, no framing, no referrer, no sniffing', async () => {
    const res = await fetch(built, '/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    );
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    const html = res.body.toString('utf8');
    expect(html).toContain('<script type="module" src="/assets/app.js"></script>');
    expect(html).not.toMatch(/<script>(?!<)/); // no inline script
  });

  it('serves its two assets, gzip when asked; the first page stays small', async () => {
    const plain = await fetch(built, '/assets/app.js');
    const gzip = await fetch(built, '/assets/app.js', true);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzip.body).equals(plain.body)).toBe(true);
    const css = await fetch(built, '/assets/console.css', true);
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    const firstPage = [gzip, css, await fetch(built, '/', true)].reduce((n, r) => n + r.body.length, 0);
    expect(firstPage).toBeLessThanOrEqual(150 * 1024);
  });

  it('serves nothing else: other names, dot-dot and encoded paths are 404', async () => {
    for (const path of [
      '/assets/app.js.map',
      '/assets/..%2F..%2Fpackage.json',
      '/assets/%2e%2e',
      '/index.html',
      '/assets/',
    ]) {
      const res = await fetch(built, path);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expect(res.body.toString('utf8')).not.toContain('"name"');
    }
  });

  it('says how to build it when it was not built (503)', async () => {
    const res = await fetch(unbuilt, '/');
    expect(res.status).toBe(503);
    expect(res.body.toString('utf8')).toContain('npm run build');
  });
});
