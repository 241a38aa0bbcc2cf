import { execFileSync } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCsr, newWorkerKey } from './csr';

/** openssl's reading of a request, stdout and stderr together (3.0 exits 0 on a failed verify). */
const openssl = (args: string) =>
  execFileSync('sh', ['-c', `openssl req ${args} 2>&1`], { encoding: 'utf8' });

describe('the hand-written PKCS#10 request (ADR 0045)', () => {
  it('is a valid, self-signed request over the new key that openssl reads: CN=<worker id>, P-256', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ql-csr-'));
    try {
      // A long id makes the DER lengths take the long form too.
      const workerId = `w${'x'.repeat(62)}`;
      const key = newWorkerKey();
      const pem = buildCsr(workerId, key.privateKey);
      const path = join(dir, 'worker.csr');
      writeFileSync(path, pem);
      const text = openssl(`-in '${path}' -noout -verify -subject -pubkey`);
      expect(text).toContain('verify OK');
      expect(text).toContain(`subject=CN = ${workerId}`);
      const publicPem = /-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----/.exec(text)![0];
      expect(createPublicKey(publicPem).equals(createPublicKey(key.privateKey))).toBe(true);
      expect(key.privateKey.asymmetricKeyDetails).toEqual({ namedCurve: 'prime256v1' });
      // One bit of the signature flipped: refused, so the request really is self-signed.
      const der = Buffer.from(pem.split('\n').slice(1, -2).join(''), 'base64');
      der[der.length - 3] ^= 0x01;
      writeFileSync(path, der);
      expect(openssl(`-inform DER -in '${path}' -noout -verify`)).toContain('verify failure');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
