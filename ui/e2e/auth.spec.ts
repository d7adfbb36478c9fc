// The sign-in flow against a real converge started with an AUTH_FILE (see global-setup.ts):
// the UI asks for a token on 401, shows the resources with a viewer token kept in
// sessionStorage only, shows the server's 403 naming the role needed, and signs out.

import { expect, test, type Page } from '@playwright/test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test-results/screenshots');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
const ui = (p: string) => `${process.env.E2E_AUTH_UI_BASE}${p}`;
const KIND = 'account';
const NAME = 'signed-in-acct';

test('with AUTH_FILE the UI asks for a token and a viewer sees the resources', async ({ page }) => {
  const viewer = process.env.E2E_AUTH_VIEWER_TOKEN!;
  expect(viewer).toBeTruthy();
  await page.goto(ui('/resources/list'));
  const field = page.getByLabel('API token');
  await expect(field).toBeVisible();
  await expect(field).toHaveAttribute('type', 'password');
  await expect(page.getByText('kept for this browser tab only', { exact: false })).toBeVisible();
  await expect(page.locator('table.resource-table')).toHaveCount(0);
  await shot(page, '11-sign-in');

  await field.fill('cvg_not-a-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('alert')).toContainText('did not accept that token');

  await page.getByLabel('API token').fill(viewer);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const row = page.locator(`table.resource-table tbody tr[data-ref="${KIND}/${NAME}"]`);
  await expect(row).toBeVisible();
  await expect(page.getByText('1 resource · page 1')).toBeVisible();
  const stored = await page.evaluate(() => ({ session: sessionStorage.getItem('converge.token'), local: localStorage.length }));
  expect(stored).toEqual({ session: viewer, local: 0 });
  await shot(page, '12-signed-in-list');

  // A viewer may read but not quarantine: the server's 403 names the role needed.
  await row.getByRole('button', { name: NAME }).click();
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: `${KIND}/${NAME}` })).toBeVisible();
  // Its watch carries the token too (the browser's EventSource could not): the panel is live.
  await expect(panel.locator('.live-badge')).toHaveText('live');
  await panel.getByRole('button', { name: 'Quarantine' }).click();
  const problem = panel.getByLabel('Actions').getByRole('alert');
  await expect(problem).toContainText('403');
  await expect(problem).toContainText('needs role operator');
  await shot(page, '13-viewer-403');

  // Sign out forgets the token and asks again; nothing read with it stays on screen.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page.getByLabel('API token')).toBeVisible();
  await expect(page.locator('table.resource-table')).toHaveCount(0);
  expect(await page.evaluate(() => sessionStorage.getItem('converge.token'))).toBeNull();
});
