import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { workerConfigTable } from '../../../worker/src/config/worker-config';
import { ConfigError, SETTINGS, configTable, loadConfig } from './config';

describe('control-plane configuration (R-OPS-3, R-PROF-1/2)', () => {
  it('has a default for everything: an empty environment is the standalone SQLite install', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      profile: 'standalone',
      databaseUrl: 'sqlite:./var/ql.sqlite',
      devPki: true,
      tlsCaPath: './var/pki/ca.crt',
      sessionLeaseMs: 30_000,
      placementPreferenceHoldMs: 5_000,
    });
  });

  it('cluster-control refuses SQLite and does not create a dev PKI by default', () => {
    expect(() => loadConfig({ QL_PROFILE: 'cluster-control' })).toThrow(/refuses SQLite/);
    const c = loadConfig({ QL_PROFILE: 'cluster-control', QL_DATABASE_URL: 'postgres://db/ql' });
    expect(c.devPki).toBe(false);
  });

  it.each([
    [{ QL_PROFILE: 'cluster' }, /QL_PROFILE=cluster is not one of/],
    [{ QL_SESSION_LEASE_MS: '4999' }, /QL_SESSION_LEASE_MS=4999 must be an integer in 5000..600000/],
    [{ QL_SESSION_LEASE_MS: '600001' }, /must be an integer/],
    [{ QL_PROTOCOL_MIN: '5' }, /QL_PROTOCOL_MIN=5 must be an integer in 3..4/],
    [{ QL_PROTOCOL_MIN: '4', QL_PROTOCOL_MAX: '3' }, /QL_PROTOCOL_MIN=4 is over QL_PROTOCOL_MAX=3/],
    [{ QL_ADMIN_PORT: '80a' }, /QL_ADMIN_PORT/],
    [
      { QL_PLACEMENT_PREFERENCE_HOLD_MS: '60001' },
      /QL_PLACEMENT_PREFERENCE_HOLD_MS=60001 must be an integer in 0..60000/,
    ],
    [{ QL_DEV_PKI: 'yes' }, /must be true or false/],
    [{ QL_TRUST_DOMAIN: 'Bad Domain' }, /trust domain/],
    [{ QL_ADMN_PORT: '1' }, /unknown setting\(s\): QL_ADMN_PORT/],
    [
      { QL_WORKER_CERT_TTL_MS: '299999' },
      /QL_WORKER_CERT_TTL_MS=299999 must be an integer in 300000..2592000000/,
    ],
    [{ QL_WORKER_CERT_TTL_MS: '2592000001' }, /must be an integer/],
    [{ QL_WORKER_ISSUER_KEY_PEM: 'pem', QL_WORKER_ISSUER_KEY: 'k' }, /not both/],
    [{ QL_DEV_PKI: 'false', QL_WORKER_ISSUER_CERT: 'c.crt' }, /QL_WORKER_ISSUER_CERT needs its key/],
    [{ QL_DEV_PKI: 'false', QL_WORKER_ISSUER_KEY: 'c.key' }, /needs QL_WORKER_ISSUER_CERT/],
    [{ QL_ENROLL_RATE_PER_MINUTE: '0' }, /QL_ENROLL_RATE_PER_MINUTE=0 must be an integer/],
  ])('fails fast with a clear message on %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('issues worker certificates with the dev PKI intermediate by default, else only when configured (ADR 0045 §5)', () => {
    expect(loadConfig({})).toMatchObject({
      workerIssuerCertPath: './var/pki/worker-issuer.crt',
      workerIssuerKeyPath: './var/pki/worker-issuer.key',
      workerIssuerKeyPem: '',
      workerCertTtlMs: 86_400_000,
      enrollRatePerMinute: 30,
    });
    const cluster = { QL_PROFILE: 'cluster-control', QL_DATABASE_URL: 'postgres://db/ql' };
    expect(loadConfig(cluster)).toMatchObject({ workerIssuerCertPath: '', workerIssuerKeyPath: '' });
    const inEnv = loadConfig({ ...cluster, QL_WORKER_ISSUER_CERT: 'i.crt', QL_WORKER_ISSUER_KEY_PEM: 'pem' });
    expect(inEnv).toMatchObject({
      workerIssuerCertPath: 'i.crt',
      workerIssuerKeyPem: 'pem',
      workerIssuerKeyPath: '',
    });
    expect(loadConfig({ QL_WORKER_ISSUER_KEY_PEM: 'pem' }).workerIssuerKeyPath).toBe('');
  });

  it('documents every setting, and the README carries the generated table', () => {
    for (const s of SETTINGS) expect(s.doc.length).toBeGreaterThan(10);
    const readme = readFileSync(join(__dirname, '../../../../README.md'), 'utf8');
    expect(readme).toContain(configTable());
    expect(readme).toContain(workerConfigTable());
  });
});
