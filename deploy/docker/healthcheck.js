'use strict';
/**
 * Container healthcheck (docker-compose.yml), run inside the container with its environment:
 *   node deploy/docker/healthcheck.js control-plane   GET /readyz on the admin port: 200 = healthy
 *   node deploy/docker/healthcheck.js worker          an mTLS request to each origin of
 *                                                     QL_WORKER_CONTROL_PLANE_URL in turn with this worker's
 *                                                     CA, certificate and key: the first answer below 500
 *                                                     = both sides trust each other
 * Exit 0 = healthy, 1 = not. The worker check says nothing about its session: a fenced or expired
 * worker exits by itself and the restart policy brings it back.
 */
const { readFileSync } = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const { URL } = require('node:url');

const TIMEOUT_MS = 3000;
const env = process.env;

/**
 * Exits 0 when an answer's status passes `ok`; tries the next target on any other status, an error or
 * the timeout, and exits 1 when none passed.
 */
function probe(get, targets, ok) {
  const [options, ...rest] = targets;
  const next = (why) => {
    process.stderr.write(`unhealthy: ${why}\n`);
    if (rest.length === 0) process.exit(1);
    probe(get, rest, ok);
  };
  const req = get(options, (res) => {
    res.resume();
    if (ok(res.statusCode)) process.exit(0);
    next(`HTTP ${res.statusCode}`);
  });
  req.setTimeout(TIMEOUT_MS, () => req.destroy(new Error('timeout')));
  req.on('error', (error) => next(error.message));
}

const role = process.argv[2];
if (role === 'control-plane') {
  const port = Number(env.QL_ADMIN_PORT || 8080);
  probe(http.get, [{ host: '127.0.0.1', port, path: '/readyz' }], (status) => status === 200);
} else if (role === 'worker') {
  const tls = {
    minVersion: 'TLSv1.3',
    ca: readFileSync(env.QL_WORKER_TLS_CA),
    cert: readFileSync(env.QL_WORKER_TLS_CERT),
    key: readFileSync(env.QL_WORKER_TLS_KEY),
  };
  // One origin or a comma-separated list of them (R-WRK-7), as the worker reads it.
  const origins = (env.QL_WORKER_CONTROL_PLANE_URL || 'https://127.0.0.1:8443').split(',');
  const targets = origins.map((origin) => {
    const url = new URL(origin.trim());
    return { ...tls, host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port || 443, path: '/' };
  });
  probe(https.get, targets, (status) => status < 500);
} else {
  process.stderr.write('usage: node deploy/docker/healthcheck.js control-plane|worker\n');
  process.exit(2);
}
