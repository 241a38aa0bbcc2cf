// Issue 31 item 3 in the web console (Debian's Chromium): among 2,000 tasks a QingLong user finds
// `京东签到` by search, switches it off and pins it from the list, pages through the rest, and sees the
// task's name (not its id) in the runs list and on the run's page. Both widths, no serious
// accessibility finding.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, newContext, screenshot, seriousA11yViolations } from '../support/browser';
import { ROOT, tempDir } from '../support/entry-points';
import { RemoteRunHarness } from '../support/remote-run-harness';

jest.setTimeout(240_000);

const MANY = 2_000;

describe('tasks at scale in the web console (sqlite)', () => {
  let h: RemoteRunHarness;
  let browser: Browser;
  let base: string;
  let jd: string;
  const folder = tempDir('ql-console-tasks-');

  beforeAll(async () => {
    const consoleDir = join(folder, 'console');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.js'), consoleDir]);
    h = await RemoteRunHarness.start('sqlite', ['worker-1'], { QL_CONSOLE_DIR: consoleDir });
    await h.untilOnline(h.startWorker('worker-1'));
    for (let i = 0; i < MANY; i += 8)
      await Promise.all(
        Array.from({ length: 8 }, (_, k) =>
          h.t.admin('POST', '/api/v1/tasks', {
            name: `任务 ${i + k}`,
            command: `echo ${i + k}`,
            runtime: 'shell',
          }),
        ),
      );
    jd = await h.createTask({
      name: '京东签到',
      runtime: 'shell',
      command: 'echo 签到成功',
      cron: '0 7 * * *',
    });
    browser = await launchChromium();
    base = h.t.plane.adminUrl;
  });
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  async function signIn(page: Page) {
    await page.goto(`${base}/`);
    await page.getByLabel('API key').fill(h.t.adminToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
  }
  const rows = (page: Page) => page.getByRole('region', { name: 'Tasks' }).locator('tbody tr');

  it.each([1280, 360])(
    'at %i px: finds 京东签到 among 2,000 by search, disables and pins it, pages on',
    async (width) => {
      const { context } = await newContext(browser, width);
      const page = await context.newPage();
      await signIn(page);
      await page.goto(`${base}/#/tasks`);
      await rows(page).first().waitFor();
      expect(await rows(page).count()).toBe(100);
      const firstPage = await rows(page).first().innerText();
      await page.getByRole('button', { name: 'Next' }).click();
      await rows(page)
        .first()
        .filter({ hasNotText: firstPage.split('\t')[0]! })
        .waitFor();
      expect(await rows(page).first().innerText()).not.toBe(firstPage);
      await page.getByLabel('Search (name or command)').fill('京东');
      await page.getByRole('link', { name: '京东签到' }).waitFor();
      await rows(page).nth(1).waitFor({ state: 'detached' });
      const enabled = width === 1280; // the first width switches it off, the second back on
      await page
        .getByRole('button', { name: `${enabled ? 'Disable' : 'Enable'} 京东签到`, exact: true })
        .click();
      await page
        .getByRole('button', { name: `${enabled ? 'Enable' : 'Disable'} 京东签到`, exact: true })
        .waitFor();
      const row = await rows(page).first().innerText();
      if (enabled) expect(row).toMatch(/\(disabled\)[\s\S]*skipped/);
      else expect(row).not.toContain('(disabled)');
      const task = async () =>
        (
          (await h.t.admin('GET', `/api/v1/tasks?q=${encodeURIComponent('京东')}`)).body as {
            items: { enabled: boolean; pinned: boolean }[];
          }
        ).items[0]!;
      expect((await task()).enabled).toBe(!enabled);
      await page.getByRole('button', { name: `${enabled ? 'Pin' : 'Unpin'} 京东签到`, exact: true }).click();
      await page
        .getByRole('button', { name: `${enabled ? 'Unpin' : 'Pin'} 京东签到`, exact: true })
        .waitFor();
      expect((await task()).pinned).toBe(enabled);
      expect(await seriousA11yViolations(page)).toEqual([]);
      const overflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - window.innerWidth',
      );
      expect(overflow).toBeLessThanOrEqual(0);
      await screenshot(page, `tasks-search-${width}`);
      await context.close();
    },
  );

  it('runs name their task, whichever of the 2,001 it is', async () => {
    const runId = await h.trigger(jd);
    expect((await h.untilRunEnds(runId)).status).toBe('succeeded');
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page);
    await page.goto(`${base}/#/runs`);
    await page.getByRole('region', { name: 'Runs' }).getByRole('link', { name: '京东签到' }).waitFor();
    await page.goto(`${base}/#/runs/${runId}`);
    await page.getByRole('link', { name: '京东签到' }).waitFor();
    await context.close();
  });

  it("a task's page disables it and deletes it after asking", async () => {
    const id = await h.createTask({ name: '旧脚本', runtime: 'shell', command: 'echo old' });
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page);
    await page.goto(`${base}/#/tasks/${id}`);
    await page.getByText('enabled', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByText('disabled (cron skips it; its schedule is kept)').waitFor();
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await page.getByRole('heading', { level: 2, name: 'Tasks' }).waitFor();
    expect((await h.t.admin('GET', `/api/v1/tasks/${id}`)).status).toBe(404);
    await context.close();
  });
});
