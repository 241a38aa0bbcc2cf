// Issue 31 item 2 in the web console (Debian's Chromium, ADR 0052): a QingLong user adds the global
// cookie variable `JD_COOKIE` (two accounts joined by &) and a plain one on the env vars page, runs
// `京东签到` on a real worker and sees, on the run's page, the cookie as *** in the live log and the
// variables it received; disables, reorders and deletes a variable; previews an import. A failed
// run shows its error summary. On the Access page an admin makes a viewer key and an enrollment token,
// each shown once, and revokes them. Both widths, no serious accessibility finding.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, newContext, screenshot, seriousA11yViolations } from '../support/browser';
import { ROOT, tempDir } from '../support/entry-points';
import { RemoteRunHarness } from '../support/remote-run-harness';
import { issuerEnv } from '../support/enrolled-worker';

jest.setTimeout(180_000);

const ACCOUNT_1 = `pt_key=${randomBytes(12).toString('hex')};pt_pin=jd_一号;`;
const ACCOUNT_2 = `pt_key=${randomBytes(12).toString('hex')};pt_pin=jd_二号;`;

describe('env vars in the web console (sqlite, a real worker process)', () => {
  let h: RemoteRunHarness;
  let browser: Browser;
  let base: string;
  const folder = tempDir('ql-console-env-');

  beforeAll(async () => {
    const consoleDir = join(folder, 'console');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.js'), consoleDir]);
    h = await RemoteRunHarness.start('sqlite', ['worker-1'], (pki) => ({
      QL_CONSOLE_DIR: consoleDir,
      QL_SECRETS_KEY: randomBytes(32).toString('base64'),
      ...issuerEnv(pki),
    }));
    await h.untilOnline(h.startWorker('worker-1'));
    browser = await launchChromium();
    base = h.t.plane.adminUrl;
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
  const table = (page: Page) => page.getByRole('region', { name: 'Environment variables, in order' });

  it('adds a secret cookie and a plain variable; 京东签到 prints the cookie as *** and the run lists what it received', async () => {
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    await page.getByRole('link', { name: 'Env vars' }).click();
    await page.getByRole('heading', { level: 2, name: 'Environment variables' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('JD_COOKIE');
    await page.getByLabel('Value', { exact: true }).fill(`${ACCOUNT_1}&${ACCOUNT_2}`);
    await page.getByLabel('Remark').fill('两个京东账号');
    await page.getByRole('button', { name: 'Add variable' }).click();
    await table(page).getByText('JD_COOKIE').waitFor();
    await page.getByLabel('Name', { exact: true }).fill('JD_UA');
    await page.getByLabel('Value', { exact: true }).fill('jdapp;iPhone;京东');
    await page.getByLabel('Secret (encrypted, write-only, shown as *** in output)').uncheck();
    await page.getByRole('button', { name: 'Add variable' }).click();
    await table(page).getByText('jdapp;iPhone;京东').waitFor();
    // The secret's value is never on the page again; the plain one's is.
    const text = await table(page).innerText();
    expect(text).toContain('secret (write-only)');
    expect(text).toContain('两个京东账号');
    for (const account of [ACCOUNT_1, ACCOUNT_2]) expect(await page.content()).not.toContain(account);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, 'env-vars-1280');

    const command = [
      'console.log("cookie=" + process.env.JD_COOKIE);',
      'console.log("accounts=" + process.env.JD_COOKIE.split("&").length);',
      'console.log("ua=" + process.env.JD_UA);',
    ].join('\n');
    const runId = await h.trigger(await h.createTask({ name: '京东签到', runtime: 'node', command }));
    await page.goto(`${base}/#/runs/${runId}`);
    const log = page.getByTestId('run-log');
    await log.getByText('ua=jdapp;iPhone;京东').waitFor();
    expect(await log.innerText()).toBe('cookie=***\naccounts=2\nua=jdapp;iPhone;京东\n');
    await page.getByText('JD_COOKIE v1 (secret), JD_UA v1').waitFor();
    for (const account of [ACCOUNT_1, ACCOUNT_2]) expect(await page.content()).not.toContain(account);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await context.close();
  });

  it('disables, moves and deletes a variable, and previews an import without writing it', async () => {
    const { context } = await newContext(browser, 360);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    await page.goto(`${base}/#/env`);
    await table(page).getByText('JD_UA').waitFor();
    await page.getByRole('button', { name: 'Disable JD_UA' }).click();
    await page.getByRole('button', { name: 'Enable JD_UA' }).waitFor();
    await page.getByRole('button', { name: 'Move JD_UA up' }).click();
    await page.getByRole('button', { name: 'Move JD_UA down' }).waitFor();
    const vars = async () =>
      ((await h.t.admin('GET', '/api/v1/env-vars')).body as { items: { name: string; enabled: boolean }[] })
        .items;
    expect((await vars()).map((v) => [v.name, v.enabled])).toEqual([
      ['JD_UA', false],
      ['JD_COOKIE', true],
    ]);

    await page.getByLabel('File content').fill('export WSKEY="wskey=一&wskey=二"\nexport TG_USER="12345"\n');
    await page.getByLabel('Plain variables (names, comma separated)').fill('TG_USER');
    await page.getByRole('button', { name: 'Preview' }).click();
    const report = page.getByRole('definition').filter({ hasText: 'create 2' });
    await report.waitFor();
    expect(await page.getByText('Would import').count()).toBe(1);
    expect((await vars()).map((v) => v.name)).toEqual(['JD_UA', 'JD_COOKIE']);
    await page.getByRole('button', { name: 'Import', exact: true }).click();
    await page.getByText('Imported', { exact: true }).waitFor();
    await table(page).getByText('TG_USER').waitFor();
    expect((await vars()).map((v) => v.name)).toEqual(['JD_UA', 'JD_COOKIE', 'WSKEY', 'TG_USER']);

    await page.getByRole('button', { name: 'Delete', exact: true }).first().click();
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await page.getByRole('button', { name: 'Edit JD_UA' }).waitFor({ state: 'detached' });
    expect((await vars()).map((v) => v.name)).toEqual(['JD_COOKIE', 'WSKEY', 'TG_USER']);
    expect(await seriousA11yViolations(page)).toEqual([]);
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'env-vars-360');
    await context.close();
  });

  it('a failed run shows its error summary on its page', async () => {
    const runId = await h.trigger(
      await h.createTask({ name: '超时任务', runtime: 'shell', command: 'sleep 30', timeoutMs: 1_000 }),
    );
    expect((await h.untilRunEnds(runId)).status).toBe('timed_out');
    const { context } = await newContext(browser, 1280);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    const attempt = (
      (await h.t.admin('GET', `/api/v1/runs/${runId}`)).body as {
        attempts: { errorCode: string | null; errorSummary: string }[];
      }
    ).attempts[0]!;
    expect(attempt.errorSummary).toBeTruthy();
    await page.goto(`${base}/#/runs/${runId}`);
    const error = page.getByTestId('attempt-error').first();
    await error.getByText(attempt.errorSummary, { exact: false }).waitFor();
    expect(await error.innerText()).toBe(
      `${attempt.errorCode ? `${attempt.errorCode} ` : ''}${attempt.errorSummary}`,
    );
    await context.close();
  });

  it('the Access page makes a viewer key and an enrollment token, each shown once, and revokes them', async () => {
    const { context } = await newContext(browser, 360);
    const page = await context.newPage();
    await signIn(page, h.t.adminToken);
    await page.getByRole('link', { name: 'Access' }).click();
    await page.getByRole('heading', { level: 2, name: 'API keys' }).waitFor();
    await page.getByLabel("New key's name").fill('值班同学');
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.getByTestId('shown-once').innerText()).trim();
    // The key works, as a viewer: it reads, it cannot change.
    expect((await h.t.admin('GET', '/api/v1/tasks', undefined, key)).status).toBe(200);
    expect((await h.t.admin('POST', '/api/v1/env-vars', { name: 'X_Y', value: 'v' }, key)).status).toBe(403);
    const keys = page.getByRole('region', { name: 'API keys' });
    await keys.getByText('值班同学').waitFor();
    await page.getByLabel('Worker id').fill('router-shanghai-01');
    await page.getByRole('button', { name: 'Create token' }).click();
    await page.getByRole('region', { name: 'Enrollment tokens' }).getByText('router-shanghai-01').waitFor();
    const shown = await page.getByTestId('shown-once').allInnerTexts();
    expect(shown).toHaveLength(2);
    expect(await seriousA11yViolations(page)).toEqual([]);
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'access-360');
    // Revoke the key: it no longer reads.
    await keys
      .getByRole('row', { name: /值班同学/ })
      .getByRole('button', { name: 'Revoke' })
      .click();
    await page.getByRole('button', { name: 'Yes, revoke' }).click();
    await keys.getByText(/revoked/).waitFor();
    expect((await h.t.admin('GET', '/api/v1/tasks', undefined, key)).status).toBe(401);
    await context.close();
  });
});
