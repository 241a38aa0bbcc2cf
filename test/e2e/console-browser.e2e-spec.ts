// Size: the web console as a person uses it, in Debian's Chromium (issue 20): sign-in, the first task
// with its live log on a real worker, cancel, a viewer's view, CSRF, a script-like log line, headers,
// certificate expiry, a worker's runs, the full task form, accessibility, keyboard use and the
// screenshots of every page at two widths.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { ingressPath } from '@ql/contracts';
import { launchChromium, newContext, screenshot, seriousA11yViolations } from '../support/browser';
import { bundleOf } from '../support/bundle-fixtures';
import { enrollWorker, issuerEnv } from '../support/enrolled-worker';
import { newSessionId, registerBody } from '../support/fixtures';
import { ROOT, tempDir } from '../support/entry-points';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';

jest.setTimeout(180_000);

const SCRIPT_LIKE = '<img src=x onerror=alert(1)>';

describe('the web console in a real browser (sqlite, a real worker process)', () => {
  let h: RemoteRunHarness;
  let worker: RunWorker;
  let browser: Browser;
  let base: string;
  const folder = tempDir('ql-console-');

  beforeAll(async () => {
    const consoleDir = join(folder, 'console');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.js'), consoleDir]);
    h = await RemoteRunHarness.start('sqlite', ['worker-1'], (pki) => ({
      QL_CONSOLE_DIR: consoleDir,
      QL_SECRETS_KEY: randomBytes(32).toString('base64'),
      ...issuerEnv(pki),
    }));
    worker = h.startWorker('worker-1', { env: { QL_WORKER_LABELS: 'zone=lab' } });
    browser = await launchChromium();
    base = h.t.plane.adminUrl;
    await h.untilOnline(worker);
  });
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  async function signIn(page: Page, key: string) {
    await page.goto(`${base}/`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
  }
  const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 2, name });

  it('serves the page with a strict CSP, no framing and no referrer', async () => {
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    const res = await page.goto(`${base}/`);
    const headers = res!.headers();
    expect(headers['content-security-policy']).toContain("script-src 'self'");
    expect(headers['content-security-policy']).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(headers['x-frame-options']).toBe('DENY');
    expect(headers['referrer-policy']).toBe('no-referrer');
    await page.getByLabel('API key').waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, 'sign-in-1280');
    await context.close();
  });

  it('signs in, sees worker-1, creates a task, runs it and watches its live log fill until it succeeds', async () => {
    const { context, dialogs } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    // The key is kept nowhere a script could read it; the session cookie is HttpOnly.
    const stored = await page.evaluate<string>(
      'JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie',
    );
    expect(stored).not.toContain(h.t.adminToken);
    expect(stored).not.toContain('ql_session');
    await screenshot(page, 'dashboard-1280');

    await page.getByRole('link', { name: 'Workers', exact: true }).click();
    const row = page.getByRole('row', { name: /worker-1/ });
    await row.getByText('online').waitFor();
    await screenshot(page, 'workers-1280');

    const marker = join(folder, 'go-on');
    await page.getByRole('link', { name: 'Tasks', exact: true }).click();
    await page.getByRole('link', { name: 'New task' }).click();
    await page.getByLabel('Name').fill('first task');
    await page
      .getByLabel('Command')
      .fill(
        `echo first-line; while [ ! -f '${marker}' ]; do sleep 0.05; done; echo second-line; ` +
          `printf '%s\\n' '${SCRIPT_LIKE}'; printf '\\033[31mred text\\033[0m\\n'; echo oops >&2`,
      );
    await page.getByLabel('Cron (empty: only when triggered)').fill('0 7 * * *');
    await page.getByLabel('Time zone').fill('Asia/Shanghai');
    await page.getByText('Next fires (Asia/Shanghai):').waitFor();
    expect(await page.locator('.cron-preview li').count()).toBe(5);
    await screenshot(page, 'task-new-1280');
    await page.getByRole('button', { name: 'Create' }).click();
    // Typing the schedule kept what was typed above it (each field keeps its own state).
    await heading(page, 'Task first task').waitFor();
    await screenshot(page, 'task-1280');

    await page.getByRole('button', { name: 'Run now' }).click();
    const log = page.getByTestId('run-log');
    try {
      await log.getByText('first-line').waitFor();
      // The log shows output while the run still runs: it waits for the marker, not yet written.
      expect(await page.getByTestId('run-status').textContent()).not.toMatch(/succeeded|failed/);
      expect(await log.textContent()).not.toContain('second-line');
    } finally {
      writeFileSync(marker, '');
    }
    await log.getByText('second-line').waitFor();
    await page.getByTestId('run-status').getByText('succeeded').waitFor();
    await page.getByText('The run ended; this is its whole log.').waitFor();
    // A script-like line is text: no element, no dialog; colours are classes, stderr apart.
    expect(await log.textContent()).toContain(SCRIPT_LIKE);
    expect(await log.locator('img').count()).toBe(0);
    expect(await log.locator('.ansi-fg-1').textContent()).toBe('red text');
    expect(await log.locator('.stream-stderr').textContent()).toContain('oops');
    expect(dialogs).toEqual([]);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, 'run-1280');
    await context.close();
  });

  it('cancels a long run from its page', async () => {
    const runId = await h.trigger(
      await h.createTask({ runtime: 'shell', command: 'echo started; sleep 300' }),
    );
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    await page.goto(`${base}/#/runs/${runId}`);
    await page.getByTestId('run-log').getByText('started').waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('button', { name: 'Yes, cancel' }).click();
    await page.getByTestId('run-status').getByText('cancelled').waitFor();
    expect((await h.run(runId)).status).toBe('cancelled');
    await context.close();
  });

  it('a viewer sees no buttons, and a change forged from its session is 403', async () => {
    const taskId = await h.createTask({ runtime: 'shell', command: 'echo viewer' });
    const runId = await h.trigger(taskId);
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page, h.t.viewerToken);
    await page.goto(`${base}/#/tasks`);
    await heading(page, 'Tasks').waitFor();
    await page.getByRole('row').nth(1).waitFor();
    await page.goto(`${base}/#/tasks/${taskId}`);
    await page.getByText('Recent runs').waitFor();
    await page.goto(`${base}/#/runs/${runId}`);
    await page.getByTestId('run-status').waitFor();
    await page.goto(`${base}/#/workers/worker-1`);
    await page.getByText('Capabilities').waitFor();
    for (const path of ['#/tasks', `#/tasks/${taskId}`, `#/runs/${runId}`, '#/workers/worker-1']) {
      await page.goto(`${base}/${path}`);
      await page.locator('main section').waitFor();
      // Paging changes nothing: the only buttons a viewer may see.
      const buttons = (await page.locator('main button, main a.button').allTextContents()).filter(
        (b) => b !== 'Previous' && b !== 'Next',
      );
      expect({ path, buttons }).toEqual({
        path,
        buttons: path.startsWith('#/runs') ? expect.not.arrayContaining(['Cancel']) : [],
      });
    }
    const forged = await page.evaluate(async () => {
      const session = (await (await fetch('/api/v1/session')).json()) as { csrfToken: string };
      const res = await fetch('/api/v1/tasks', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrfToken },
        body: JSON.stringify({ name: 'forged by a viewer', command: 'true', runtime: 'shell' }),
      });
      return { status: res.status, code: ((await res.json()) as { code: string }).code };
    });
    expect(forged).toEqual({ status: 403, code: 'forbidden' });
    await context.close();
  });

  it("an admin session's change without the CSRF token is refused", async () => {
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    const answer = await page.evaluate(async () => {
      const res = await fetch('/api/v1/tasks', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'no csrf', command: 'true', runtime: 'shell' }),
      });
      return { status: res.status, code: ((await res.json()) as { code: string }).code };
    });
    expect(answer).toEqual({ status: 403, code: 'csrf_token_invalid' });
    await context.close();
  });

  it('works with the keyboard alone: sign in, reach the workers page, add a row to the task form', async () => {
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await page.goto(`${base}/`);
    await page.getByLabel('API key').waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string | undefined>('document.activeElement?.id')).toBe('apiKey');
    await page.keyboard.type(h.t.adminToken);
    await page.keyboard.press('Enter');
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    for (let i = 0; i < 10; i++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate<string | undefined>('document.activeElement?.textContent')) === 'Workers')
        break;
    }
    await page.keyboard.press('Enter');
    await heading(page, 'Workers').waitFor();
    // The task form's rows: "Add required label" from the keyboard puts the focus in the new row.
    await page.goto(`${base}/#/tasks/new`);
    await heading(page, 'New task').waitFor();
    await page.getByRole('button', { name: 'Add required label' }).focus();
    await page.keyboard.press('Enter');
    await page.getByLabel('Required labels 1 key').waitFor();
    expect(await page.evaluate<string | null>("document.activeElement?.getAttribute('aria-label')")).toBe(
      'Required labels 1 key',
    );
    await page.keyboard.type('zone');
    await page.keyboard.press('Tab');
    await page.keyboard.type('lab');
    expect(await page.getByLabel('Required labels 1 key').inputValue()).toBe('zone');
    expect(await page.getByLabel('Required labels 1 value').inputValue()).toBe('lab');
    await context.close();
  });

  describe('workers: certificate expiry, their recent runs, and the runs filtered by worker', () => {
    let life: { issuedAt: number; notAfter: number };
    let runId: string;
    let taskId: string;
    beforeAll(async () => {
      // worker-2 enrolls (its certificate is issued here) and registers a session; it never pulls.
      const credentials = await enrollWorker(h.t, 'worker-2');
      const registered = await h.t.ingress(
        credentials,
        ingressPath('worker-2', newSessionId(), 'register'),
        registerBody(),
      );
      expect(registered.status).toBe(200);
      const view = (await h.worker('worker-2')) as unknown as Record<string, string>;
      life = {
        issuedAt: Date.parse(view.certificateIssuedAt!),
        notAfter: Date.parse(view.certificateNotAfter!),
      };
      expect(life.notAfter).toBeGreaterThan(life.issuedAt);
      // worker-1's certificate is the test PKI's, made by hand: none issued here.
      expect(await h.worker('worker-1')).toMatchObject({
        certificateIssuedAt: null,
        certificateNotAfter: null,
      });
      taskId = await h.createTask({ runtime: 'shell', command: 'echo on worker-1' });
      runId = (await h.untilRunEnds(await h.trigger(taskId))).id;
    });

    it.each([1280, 360])('at %i px', async (width) => {
      const { context } = await newContext(browser, width);
      const page = await context.newPage();
      await signIn(page, h.t.adminToken);
      await page.goto(`${base}/#/workers`);
      const enrolled = page.getByRole('row', { name: /worker-2/ });
      await enrolled.getByText(/^expires in /).waitFor();
      expect(await enrolled.locator('.cert-warn').count()).toBe(0);
      await page
        .getByRole('row', { name: /worker-1/ })
        .getByText('— (not enrolled)')
        .waitFor();
      await screenshot(page, `workers-certificates-${width}`);

      // The worker page lists the runs that ran on it, with their task, linked.
      await page.goto(`${base}/#/workers/worker-1`);
      const recent = page.getByRole('region', { name: 'Recent runs on this worker' });
      const row = recent.getByRole('row', { name: new RegExp(runId.slice(-12)) });
      await row.getByText('succeeded').waitFor();
      expect(await row.getByRole('link', { name: runId.slice(-12) }).getAttribute('href')).toBe(
        `#/runs/${runId}`,
      );
      expect(await row.getByRole('link', { name: /^remote run / }).getAttribute('href')).toBe(
        `#/tasks/${taskId}`,
      );
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, `worker-runs-${width}`);

      // The runs page filtered by worker: worker-2 ran nothing, worker-1 ran it.
      await page.goto(`${base}/#/runs`);
      await page.getByRole('row', { name: new RegExp(runId.slice(-12)) }).waitFor();
      await page.getByLabel('Worker').selectOption('worker-2');
      await page.getByText('No runs.').waitFor();
      await page.getByLabel('Worker').selectOption('worker-1');
      await page.getByRole('row', { name: new RegExp(runId.slice(-12)) }).waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, `runs-by-worker-${width}`);
      await context.close();

      // In the last fifth of its life the expiry is a warning, in words as well as in colour.
      const late = await newContext(browser, width);
      const old = await late.context.newPage();
      await old.clock.setFixedTime(life.notAfter - 0.1 * (life.notAfter - life.issuedAt));
      await signIn(old, h.t.adminToken);
      await old.goto(`${base}/#/workers/worker-2`);
      const certificate = old.getByTestId('worker-certificate');
      await certificate
        .locator('.cert-warn')
        .getByText(/expires in/)
        .waitFor();
      expect(await certificate.textContent()).toMatch(/^⚠ Warning: expires in /);
      expect(await seriousA11yViolations(old)).toEqual([]);
      await screenshot(old, `worker-certificate-warning-${width}`);
      await late.context.close();
    });
  });

  it.each([1280, 360])('the task form at %i px: placement, retries, bundle and secret env', async (width) => {
    const bundle = bundleOf({ 'scripts/hello.txt': 'hi from the bundle\n' });
    const pushed = await h.t.admin('POST', '/api/v1/bundles', undefined, undefined, {
      rawBody: bundle.content,
      headers: { 'content-type': 'application/gzip' },
    });
    expect([200, 201]).toContain(pushed.status);
    const secret = await h.t.admin('POST', '/api/v1/secrets', { name: `token-${width}`, value: 'abcdef' });
    expect([200, 201]).toContain(secret.status);
    const { context } = await newContext(browser, width);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    await page.goto(`${base}/#/tasks/new`);
    await page.getByLabel('Name').fill(`full form ${width}`);
    await page.getByLabel('Command').fill('cat hello.txt; echo "token length ${#MY_TOKEN}"');
    await page.getByLabel('Attempts in all (empty or 1: no retry)').fill('3');
    await page.getByLabel('First retry after (seconds)').fill('5');
    await page.getByRole('button', { name: 'Add required label' }).click();
    await page.getByLabel('Required labels 1 key').fill('zone');
    await page.getByLabel('Required labels 1 value').fill('lab');
    await page.getByRole('button', { name: 'Add preferred label' }).click();
    await page.getByLabel('Preferred labels 1 key').fill('disk');
    await page.getByLabel('Preferred labels 1 value').fill('ssd');
    await page.getByLabel('Preferred labels 1 weight').fill('10');
    await page.getByLabel('Script bundle').selectOption(bundle.digest);
    await page.getByLabel('Folder in the bundle').fill('scripts');
    await page.getByRole('button', { name: 'Add secret env' }).click();
    await page.getByLabel('Secret env 1 env name').fill('MY_TOKEN');
    await page.getByLabel('Secret env 1 secret').fill(`token-${width}`);
    // Leaving the field closes the secret names' suggestion list, which may cover the buttons below.
    await page.getByLabel('Secret env 1 secret').press('Tab');
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, `task-form-full-${width}`);
    await page.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('heading', { level: 2, name: `Task full form ${width}` }).waitFor();
    const taskId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
    const saved = (await h.t.admin('GET', `/api/v1/tasks/${taskId}`)).body as {
      spec: Record<string, unknown>;
    };
    expect(saved.spec).toMatchObject({
      retry: { maxAttempts: 3, initialBackoffMs: 5000 },
      placement: {
        required: { labels: { zone: 'lab' } },
        preferred: [{ key: 'disk', value: 'ssd', weight: 10 }],
      },
      bundle: { digest: bundle.digest, workdir: 'scripts' },
      secretEnv: { MY_TOKEN: `token-${width}` },
    });
    await page.getByText('requires zone=lab; prefers disk=ssd (weight 10)').waitFor();
    await screenshot(page, `task-full-${width}`);
    // It runs on worker-1 (zone=lab) in the bundle's folder with the secret in its env.
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.getByTestId('run-status').getByText('succeeded').waitFor();
    await page.getByTestId('run-log').getByText('hi from the bundle').waitFor();
    await page.getByTestId('run-log').getByText('token length 6').waitFor();
    // The edit form shows what was saved; saving it unchanged makes no new revision.
    await page.goto(`${base}/#/tasks/${taskId}/edit`);
    expect(await page.getByLabel('Required labels 1 key').inputValue()).toBe('zone');
    expect(await page.getByLabel('Secret env 1 secret').inputValue()).toBe(`token-${width}`);
    expect(await page.getByLabel('Script bundle').inputValue()).toBe(bundle.digest);
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('heading', { level: 2, name: `Task full form ${width}` }).waitFor();
    expect(((await h.t.admin('GET', `/api/v1/tasks/${taskId}`)).body as { revision: number }).revision).toBe(
      1,
    );
    await context.close();
  });

  it.each([1280, 360])(
    'every page at %i px: screenshots, no serious accessibility finding',
    async (width) => {
      const taskId = await h.createTask({ runtime: 'shell', command: 'echo for the picture' });
      const runId = await h.trigger(taskId);
      await h.untilRunEnds(runId);
      const { context } = await newContext(browser, width);
      const page = await context.newPage();
      await signIn(page, h.t.adminToken);
      const pages: [string, string, string | RegExp][] = [
        ['dashboard', '#/dashboard', 'At a glance'],
        ['workers', '#/workers', 'Workers'],
        ['worker', '#/workers/worker-1', 'Worker worker-1'],
        ['tasks', '#/tasks', 'Tasks'],
        ['task', `#/tasks/${taskId}`, /^Task /],
        ['task-new', '#/tasks/new', 'New task'],
        ['runs', '#/runs', 'Runs'],
        ['run', `#/runs/${runId}`, /^Run /],
        ['audit', '#/audit', 'Audit'],
        ['env', '#/env', 'Environment variables'],
        ['access', '#/access', 'API keys'],
      ];
      for (const [name, path, title] of pages) {
        await page.goto(`${base}/${path}`);
        await heading(page, title).waitFor();
        await page.waitForLoadState('networkidle').catch(() => undefined);
        expect({ name, width, violations: await seriousA11yViolations(page) }).toEqual({
          name,
          width,
          violations: [],
        });
        await screenshot(page, `${name}-${width}`);
        // Nothing is wider than the screen: a phone scrolls tables inside their box, not the page.
        const overflow = await page.evaluate<number>(
          'document.documentElement.scrollWidth - window.innerWidth',
        );
        expect({ name, width, overflow: overflow <= 0 }).toEqual({ name, width, overflow: true });
      }
      await context.close();
    },
  );
});
