import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  rmdirSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  AUTO_RUNS_FOLDER,
  CgroupChoice,
  CgroupHost,
  chooseRunCgroups,
  containmentLine,
  ownCgroupPath,
  parseMountinfo,
  workerCgroupFolder,
} from './cgroup';

/** This host as the worker sees it (the tests need a cgroup v2 mount writable by root, as here). */
const host: CgroupHost = {
  mountinfo: readFileSync('/proc/self/mountinfo', 'utf8'),
  selfCgroup: readFileSync('/proc/self/cgroup', 'utf8'),
  pid: process.pid,
};
const cgroup2 = parseMountinfo(host.mountinfo).find((m) => m.fsType === 'cgroup2');
if (!cgroup2) throw new Error('these tests need a cgroup v2 mount (see /proc/self/mountinfo)');
const v1 = parseMountinfo(host.mountinfo).find((m) => m.fsType === 'cgroup');
const ownDir = join(cgroup2.point, ownCgroupPath(host.selfCgroup) ?? '/');

const REGISTER = resolve(__dirname, '../../test-support/swc-register.js');

/** This file's worker folder (a real worker's is `workerCgroupFolder(id, journal)`). */
const FOLDER = `cgroup-spec-${process.pid}`;
const reason = (choice: CgroupChoice) =>
  choice.kind === 'process_group' ? choice.reason : `cgroup ${choice.cgroups.base}`;
/** A mountinfo line of a cgroup2 mount at `point`. */
const cgroup2Line = (point: string) => `99 1 0:99 / ${point} rw,relatime - cgroup2 none rw\n`;

let made: string[] = [];
afterEach(() => {
  for (const dir of made.reverse()) {
    try {
      rmdirSync(dir);
    } catch (error) {
      // gone, or (ql-runs) in use by a worker of a test running beside this one
      if (!['ENOENT', 'EBUSY'].includes(String((error as NodeJS.ErrnoException).code))) throw error;
    }
  }
  made = [];
});

describe('cgroup detection (QL_WORKER_CGROUP)', () => {
  it('off: process group only, saying why', () => {
    expect(chooseRunCgroups('off', FOLDER, host)).toEqual({
      kind: 'process_group',
      reason: 'QL_WORKER_CGROUP=off',
    });
  });

  it("auto on a writable cgroup v2 tree: attempt cgroups under <own cgroup>/ql-runs/<the worker's folder>, a real cgroup with cgroup.kill", () => {
    const runs = join(ownDir, AUTO_RUNS_FOLDER);
    const base = join(runs, FOLDER);
    const choice = chooseRunCgroups('auto', FOLDER, host);
    expect(reason(choice)).toBe(`cgroup ${base}`);
    if (choice.kind !== 'cgroup') throw new Error('no cgroups here');
    // The folders exist while an attempt's cgroup does: made with it, removed with it.
    expect(existsSync(base)).toBe(false);
    const attempt = choice.cgroups.create('01a24296-434d-7227-a4ec-443ce21cc446');
    expect(existsSync(join(attempt.path, 'cgroup.kill'))).toBe(true);
    expect(attempt.remove()).toBe(true);
    expect(existsSync(base)).toBe(false);
    // No memory controller in cgroup v2 on this host: memory.peak is left out, not invented.
    const memory = readFileSync(join(ownDir, 'cgroup.controllers'), 'utf8').includes('memory');
    expect(choice.kind === 'cgroup' && choice.cgroups.memory).toBe(memory);
  });

  it('auto where ql-runs exists (a worker beside made it) but its own cgroup is not writable for it: process group only, else the next worker to empty ql-runs takes it away for good', () => {
    // A cgroup of its own, 0555 like a container's root cgroup, with ql-runs made by a worker with more rights.
    const own = join(ownDir, `ql-spec-ro-${process.pid}`);
    const runs = join(own, AUTO_RUNS_FOLDER);
    mkdirSync(runs, { recursive: true });
    made.push(own, runs);
    chmodSync(own, 0o555);
    const script = `
      const { chooseRunCgroups } = require(${JSON.stringify(join(__dirname, 'cgroup.ts'))});
      const choice = chooseRunCgroups('auto', ${JSON.stringify(FOLDER)}, {
        mountinfo: require('fs').readFileSync('/proc/self/mountinfo', 'utf8'),
        selfCgroup: ${JSON.stringify(`0::${join(ownCgroupPath(host.selfCgroup) ?? '/', `ql-spec-ro-${process.pid}`)}\n`)},
        pid: process.pid,
      });
      console.log(choice.kind === 'process_group' ? choice.reason : 'cgroup ' + choice.cgroups.base);`;
    // Root without CAP_DAC_OVERRIDE, as the deployed worker runs (ADR 0031).
    const said = execFileSync(
      'setpriv',
      [
        '--bounding-set=-dac_override,-dac_read_search',
        '--inh-caps=-all',
        '--',
        process.execPath,
        '-r',
        REGISTER,
        '-e',
        script,
      ],
      { encoding: 'utf8' },
    ).trim();
    expect(said).toBe(
      `its cgroup ${own} is not writable (EACCES): it could not make ${AUTO_RUNS_FOLDER} again; no delegated cgroup v2 subtree`,
    );
  });

  it('auto with cgroup v1 only (no cgroup2 line in mountinfo): process group only', () => {
    const v1Only = host.mountinfo
      .split('\n')
      .filter((l) => !l.includes(' - cgroup2 '))
      .join('\n');
    expect(reason(chooseRunCgroups('auto', FOLDER, { ...host, mountinfo: v1Only }))).toMatch(
      /^no cgroup v2 is mounted here/,
    );
  });

  it('auto when the process is in no cgroup v2 hierarchy: process group only', () => {
    expect(reason(chooseRunCgroups('auto', FOLDER, { ...host, selfCgroup: '4:memory:/x\n' }))).toBe(
      'this process is in no cgroup v2 hierarchy',
    );
  });

  it('an explicit path in a cgroup v1 mount: process group only', () => {
    if (!v1) throw new Error('this test needs a cgroup v1 mount, as this host has');
    expect(reason(chooseRunCgroups(v1.point as `/${string}`, FOLDER, host))).toBe(
      `QL_WORKER_CGROUP=${v1.point} is not in a cgroup v2 mount (cgroup)`,
    );
  });

  it("an explicit writable cgroup v2 path: attempt cgroups under the worker's folder in it, which goes with the last", () => {
    const path = join(cgroup2.point, `ql-test-${process.pid}`) as `/${string}`;
    made.push(path);
    const choice = chooseRunCgroups(path, FOLDER, host);
    expect(reason(choice)).toBe(`cgroup ${join(path, FOLDER)}`);
    if (choice.kind !== 'cgroup') throw new Error('no cgroups here');
    const attempt = choice.cgroups.create('01a24296-434d-7227-a4ec-443ce21cc446');
    expect(existsSync(join(path, FOLDER, '01a24296-434d-7227-a4ec-443ce21cc446', 'cgroup.procs'))).toBe(true);
    attempt.remove();
    // The operator's folder stays; the worker's in it goes.
    expect({ path: existsSync(path), folder: existsSync(join(path, FOLDER)) }).toEqual({
      path: true,
      folder: false,
    });
  });

  it("each worker's folder is its own (id and journal folder) and goes once empty; ql-runs goes with the last one", () => {
    expect(workerCgroupFolder('worker-a', '/var/lib/ql/journal')).toMatch(/^worker-a-[0-9a-f]{12}$/);
    expect(workerCgroupFolder('worker-a', '/var/lib/ql/journal')).toBe(
      workerCgroupFolder('worker-a', '/var/lib/ql/./journal/'),
    );
    expect(workerCgroupFolder('worker-a', '/var/lib/ql/journal')).not.toBe(
      workerCgroupFolder('worker-a', '/srv/ql/journal'),
    );
    const runs = join(ownDir, AUTO_RUNS_FOLDER);
    const [one, other] = [`${FOLDER}-one`, `${FOLDER}-other`];
    const mine = chooseRunCgroups('auto', one, host);
    const theirs = chooseRunCgroups('auto', other, host);
    if (mine.kind !== 'cgroup' || theirs.kind !== 'cgroup') throw new Error('no cgroups here');
    const attempt = mine.cgroups.create('01a24296-434d-7227-a4ec-443ce21cc446');
    const their = theirs.cgroups.create('01a24296-434d-7227-a4ec-443ce21cc447');
    expect(mine.cgroups.attempts()).toEqual(['01a24296-434d-7227-a4ec-443ce21cc446']);
    mine.cgroups.removeIfEmpty(); // an attempt cgroup in it: kept
    expect(existsSync(mine.cgroups.base)).toBe(true);
    attempt.remove(); // the last of mine: my folder goes, theirs and ql-runs stay
    expect({ mine: existsSync(mine.cgroups.base), theirs: existsSync(theirs.cgroups.base) }).toEqual({
      mine: false,
      theirs: true,
    });
    their.remove();
    expect(existsSync(theirs.cgroups.base)).toBe(false);
    // ql-runs too, unless a worker of a test running beside this one has its folder there.
    const others = existsSync(runs) ? readdirSync(runs).filter((n) => !n.includes('.')) : [];
    expect({ runs: existsSync(runs), others }).toEqual({ runs: others.length > 0, others });
  });

  it('a folder that is no cgroup (a plain folder claimed as cgroup2 in mountinfo): process group only', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ql-not-cgroup-'));
    try {
      const choice = chooseRunCgroups('auto', FOLDER, {
        ...host,
        mountinfo: cgroup2Line(dir),
        selfCgroup: '0::/\n',
      });
      expect(reason(choice)).toBe(`${join(dir, AUTO_RUNS_FOLDER)} is not a cgroup v2 folder`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('a read-only cgroup v2 mount (a container without delegation)', () => {
    let point: string;
    beforeAll(() => {
      point = mkdtempSync(join(tmpdir(), 'ql-ro-cgroup2-'));
      execFileSync('mount', ['-t', 'cgroup2', '-o', 'ro', 'none', point]);
    });
    afterAll(() => {
      execFileSync('umount', [point]);
      rmdirSync(point);
    });
    const roHost = () => ({
      ...host,
      // the read-only mount as the only cgroup v2 one
      mountinfo: readFileSync('/proc/self/mountinfo', 'utf8')
        .split('\n')
        .filter((l) => !l.includes(' - cgroup2 ') || l.includes(` ${point} `))
        .join('\n'),
      selfCgroup: '0::/\n',
    });

    it('auto: the runs folder cannot be made or written, process group only', () => {
      expect(reason(chooseRunCgroups('auto', FOLDER, roHost()))).toMatch(
        // The same cgroup2 tree as the writable mount: ql-runs may exist already (a worker beside).
        new RegExp(`^(cannot create the cgroup|the cgroup) ${join(point, AUTO_RUNS_FOLDER)} .*\\(EROFS\\)`),
      );
    });

    it('the explicit path of the mount: not writable, process group only', () => {
      expect(reason(chooseRunCgroups(point as `/${string}`, FOLDER, roHost()))).toBe(
        `the cgroup ${point} is not writable (EROFS): no delegated cgroup v2 subtree`,
      );
    });
  });

  it('reads mountinfo escapes and the 0:: line', () => {
    const line = '40 30 0:37 / /sys/fs/cg\\040two rw,relatime shared:1 - cgroup2 cgroup2 rw';
    expect(parseMountinfo(line)).toEqual([{ root: '/', point: '/sys/fs/cg two', fsType: 'cgroup2' }]);
    expect(ownCgroupPath('1:cpu:/a\n0::/system.slice/ql.service\n')).toBe('/system.slice/ql.service');
  });

  it('the start line: a warning naming the reason when runs are held by their process group only', () => {
    expect(containmentLine({ kind: 'process_group', reason: 'QL_WORKER_CGROUP=off' })).toEqual({
      level: 'warn',
      msg: 'runs are contained by process group only: a task that calls setsid can outlive cancel, timeout and a crash',
      fields: { reason: 'QL_WORKER_CGROUP=off' },
    });
  });
});
