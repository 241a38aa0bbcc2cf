/**
 * Issue 20's "Done when": from `npm start` (the quickstart as a real process, its control plane and
 * worker children, in a fresh folder) to a run in the web console — the URL the quickstart prints, a
 * key made the README's way (`npm run api-key -- --name me --role admin`), worker-1 online with its
 * enrolled certificate's expiry, a task created and run from the browser, its live log and success.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { launchChromium, newContext, screenshot, seriousA11yViolations } from '../support/browser';
import { EntryPoint, QUICKSTART, ROOT, quickstartEnv, runCli, tempDir } from '../support/entry-points';

jest.setTimeout(240_000);

describe('the web console from the quickstart (npm start), in a real browser', () => {
  let dir: string;
  let env: Record<string, string>;
  let quickstart: EntryPoint;
  let browser: Browser;

  beforeAll(async () => {
    dir = tempDir('ql-console-quickstart-');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.js'), join(dir, 'console')]);
    env = await quickstartEnv(dir, {
      QL_CONSOLE_DIR: join(dir, 'console'),
      QL_WORKER_HEARTBEAT_MS: '200',
    });
    quickstart = new EntryPoint(QUICKSTART, env);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    if (quickstart?.running) {
      quickstart.kill('SIGTERM');
      await quickstart.exited;
    }
  });

  it('prints the console URL and how to make a key; the key signs in, worker-1 runs a task made in the page', async () => {
    const told = await quickstart.until(
      'the console line',
      async () => quickstart.lines.find((l) => String(l.msg).startsWith('quickstart: web console at')),
      { deadlineMs: 90_000 },
    );
    const consoleUrl = `http://127.0.0.1:${env.QL_ADMIN_PORT}/`;
    expect(told).toMatchObject({
      msg: `quickstart: web console at ${consoleUrl}; sign in with an API key: npm run api-key -- --name me --role admin`,
      console: consoleUrl,
    });
    // The README's way: `npm run api-key -- --name me --role admin` on the quickstart's database.
    const made = await runCli(env, 'api-key', '--name', 'me', '--role', 'admin');
    expect(made.code).toBe(0);
    const token = /"token": "([^"]+)"/.exec(made.stdout)?.[1];
    expect(token).toBeDefined();

    const { context, dialogs } = await newContext(browser, 1280);
    const page = await context.newPage();
    await page.goto(consoleUrl);
    await page.getByLabel('API key').fill(token!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Workers', exact: true }).click();
    const row = page.getByRole('row', { name: /worker-1/ });
    await row.getByText('online').waitFor({ timeout: 90_000 });
    // The quickstart's worker joined through enrollment: its certificate's expiry is shown, not near.
    await row.getByText(/^expires in /).waitFor();
    expect(await row.locator('.cert-warn').count()).toBe(0);
    await screenshot(page, 'quickstart-workers-1280');

    await page.getByRole('link', { name: 'Tasks', exact: true }).click();
    await page.getByRole('link', { name: 'New task' }).click();
    await page.getByLabel('Name').fill('hello');
    await page.getByLabel('Command').fill('echo hello from the quickstart; echo done >&2');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('heading', { level: 2, name: 'Task hello' }).waitFor();
    await page.getByRole('button', { name: 'Run now' }).click();
    const log = page.getByTestId('run-log');
    await log.getByText('hello from the quickstart').waitFor();
    await page.getByTestId('run-status').getByText('succeeded').waitFor();
    await page.getByText('The run ended; this is its whole log.').waitFor();
    expect(await log.locator('.stream-stderr').textContent()).toContain('done');
    const attempts = page.getByRole('region', { name: 'Attempts' });
    expect(await attempts.getByRole('link', { name: 'worker-1' }).count()).toBe(1);
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(dialogs).toEqual([]);
    await screenshot(page, 'quickstart-run-1280');
    await context.close();
  });
});
