// Size: the web console as a person uses it, in Debian's Chromium (issue 20): sign-in, the first task
// with its live log on a real worker, cancel, a viewer's view, CSRF, a script-like log line, headers,
// accessibility, keyboard use and the screenshots of every page at two widths.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, newContext, screenshot, seriousA11yViolations } from '../support/browser';
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
    h = await RemoteRunHarness.start('sqlite', ['worker-1'], { QL_CONSOLE_DIR: consoleDir });
    worker = h.startWorker('worker-1');
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
      expect({ path, buttons: await page.locator('main button, main a.button').allTextContents() }).toEqual({
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

  it('works with the keyboard alone: sign in, then reach the workers page', async () => {
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
