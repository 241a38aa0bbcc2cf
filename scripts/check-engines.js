'use strict';
/**
 * `node scripts/check-engines.js [root]`: the Node versions package.json `engines.node` declares are
 * true for every installed package. Walks `<root>/node_modules/**\/package.json` (offline, under a
 * second) and fails, naming each package, when a package's own `engines.node` does not cover the whole
 * declared range (semver subset) or the running Node — what `npm ci` would print as EBADENGINE on some
 * supported version.
 *
 * `--exercise` also loads, through the packages that depend on them, the three transitive packages
 * package.json `overrides` pins to Node 20 releases and uses each once: content-disposition
 * (@fastify/static `reply.download`), cookie (fastify `inject` with cookies, light-my-request) and
 * file-type (@nestjs/common FileTypeValidator). Prints one JSON line with what each returned.
 */
const { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } = require('node:fs');
const { Buffer } = require('node:buffer');
const { tmpdir } = require('node:os');
const { join, relative } = require('node:path');

function engineProblems(root) {
  const semver = require(require.resolve('semver', { paths: [root, __dirname] }));
  const declared = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).engines?.node;
  if (!declared) return ['package.json declares no engines.node'];
  const problems = [];
  if (!semver.satisfies(process.version, declared)) {
    problems.push(`this Node ${process.version} is outside the declared engines.node ${declared}`);
  }
  const walk = (dir) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith('.')) continue;
      const path = join(dir, entry.name);
      if (entry.name.startsWith('@')) {
        walk(path);
        continue;
      }
      const manifest = join(path, 'package.json');
      if (existsSync(manifest)) {
        const pkg = JSON.parse(readFileSync(manifest, 'utf8'));
        const range = pkg.engines?.node;
        const at = `${relative(root, path)}@${pkg.version} requires node ${range}`;
        if (typeof range === 'string' && range.trim() !== '') {
          if (!semver.validRange(range)) problems.push(`${at} (not a semver range)`);
          else if (!semver.subset(declared, range)) problems.push(`${at}, package.json declares ${declared}`);
          else if (!semver.satisfies(process.version, range))
            problems.push(`${at}, this is ${process.version}`);
        }
      }
      walk(join(path, 'node_modules'));
    }
  };
  walk(join(root, 'node_modules'));
  return problems;
}

async function exercise(root) {
  const load = (name) => require(require.resolve(name, { paths: [root] }));
  const fastify = load('fastify')({ logger: false });
  const dir = mkdtempSync(join(tmpdir(), 'ql-engines-'));
  try {
    writeFileSync(join(dir, 'report.txt'), 'hello');
    await fastify.register(load('@fastify/static'), { root: dir, serve: false });
    fastify.get('/download', (_req, reply) => reply.download('report.txt'));
    fastify.get('/cookie', (req) => ({ cookie: req.headers.cookie }));
    const download = await fastify.inject({ url: '/download' });
    const cookie = await fastify.inject({ url: '/cookie', cookies: { session: 'a b' } });
    const { FileTypeValidator } = load('@nestjs/common');
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    const validator = new FileTypeValidator({ fileType: 'image/png' });
    return {
      contentDisposition: download.headers['content-disposition'],
      downloadBody: download.body,
      cookie: JSON.parse(cookie.body).cookie,
      pngIsPng: await validator.isValid({ mimetype: 'image/png', buffer: png, size: png.length }),
      textIsPng: await validator.isValid({ mimetype: 'image/png', buffer: Buffer.from('hello'), size: 5 }),
    };
  } finally {
    await fastify.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  const args = process.argv.slice(2);
  const root = args.find((a) => !a.startsWith('-')) ?? join(__dirname, '..');
  const problems = engineProblems(root);
  for (const problem of problems) console.error(`engines: ${problem}`);
  if (problems.length > 0) {
    console.error(`engines: ${problems.length} problem(s); npm ci would warn EBADENGINE on a supported Node`);
    process.exit(1);
  }
  if (args.includes('--exercise')) console.log(JSON.stringify(await exercise(root)));
  else
    console.log(`engines: every installed package supports node ${process.version} and the declared range`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
