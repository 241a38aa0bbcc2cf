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
    [{ QL_ADMIN_PORT: '80a' }, /QL_ADMIN_PORT/],
    [
      { QL_PLACEMENT_PREFERENCE_HOLD_MS: '60001' },
      /QL_PLACEMENT_PREFERENCE_HOLD_MS=60001 must be an integer in 0..60000/,
    ],
    [{ QL_DEV_PKI: 'yes' }, /must be true or false/],
    [{ QL_TRUST_DOMAIN: 'Bad Domain' }, /trust domain/],
    [{ QL_ADMN_PORT: '1' }, /unknown setting\(s\): QL_ADMN_PORT/],
  ])('fails fast with a clear message on %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('documents every setting, and the README carries the generated table', () => {
    for (const s of SETTINGS) expect(s.doc.length).toBeGreaterThan(10);
    const readme = readFileSync(join(__dirname, '../../../../README.md'), 'utf8');
    expect(readme).toContain(configTable());
    expect(readme).toContain(workerConfigTable());
  });
});
