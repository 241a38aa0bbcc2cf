import { readFile } from 'node:fs/promises';
import type { WorkerCredentialsProvider } from './worker-ingress-https.client';

/** Reads the worker's PEM files on every call, so a rotated certificate is used without a restart. */
export function fileCredentials(paths: {
  caPath: string;
  certPath: string;
  keyPath: string;
}): WorkerCredentialsProvider {
  return async () => {
    const [caPem, certPem, keyPem] = await Promise.all([
      readFile(paths.caPath),
      readFile(paths.certPath),
      readFile(paths.keyPath),
    ]);
    return { caPem, certPem, keyPem };
  };
}
