import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { Browser, BrowserContext, Page, chromium } from 'playwright-core';
import { ROOT } from './entry-points';

/**
 * Debian's Chromium driven by playwright-core (no browser download): `scripts/install-browser.sh`
 * installs it, `.ci/run` runs that script. Without it a browser test fails, saying how to install it.
 */
const CHROMIUM = ['/usr/lib/chromium/chromium', '/usr/bin/chromium'];

export async function launchChromium(): Promise<Browser> {
  const executablePath = process.env.QL_TEST_CHROMIUM ?? CHROMIUM.find((p) => existsSync(p));
  if (!executablePath)
    throw new Error(
      'no Chromium here: run scripts/install-browser.sh (apt-get install chromium), or set QL_TEST_CHROMIUM',
    );
  return chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
}

/** Where the browser tests write their screenshots for people to look at (README: "Web console"). */
export const SCREENSHOT_DIR = join(ROOT, 'test-results', 'console-screenshots');

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/** axe-core's serious and critical findings on the page as it is now (none is the bar). */
export async function seriousA11yViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

/** A context at a given width; it records every dialog (an `alert` from injected script would be one). */
export async function newContext(
  browser: Browser,
  width: number,
): Promise<{ context: BrowserContext; dialogs: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  // Playwright's 30 s default is a clock assertion: a run on a loaded machine may take longer to start
  // or to end. The tests' own timeouts (minutes) bound a hang instead.
  context.setDefaultTimeout(120_000);
  const dialogs: string[] = [];
  context.on('page', (p) => p.on('dialog', (d) => (dialogs.push(d.message()), void d.dismiss())));
  return { context, dialogs };
}
