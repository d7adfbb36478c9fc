// The sign-in flow against a real converge started with an AUTH_FILE (see global-setup.ts):
// the UI asks for a token on 401, shows the resources with a viewer token kept in
// sessionStorage only, names the principal and its role, disables (with the reason) what a
// viewer may not do and enables it for an operator, signs out, and shows the activity feed
// with the actors.

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
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page.getByRole('alert')).toContainText('did not accept that token');

  await page.getByLabel('API token').fill(viewer);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  const row = page.locator(`table.resource-table tbody tr[data-ref="${KIND}/${NAME}"]`);
  await expect(row).toBeVisible();
  await expect(page.getByText('1 resource · page 1')).toBeVisible();
  const stored = await page.evaluate(() => ({ session: sessionStorage.getItem('converge.token'), local: localStorage.length }));
  expect(stored).toEqual({ session: viewer, local: 0 });
  await shot(page, '12-signed-in-list');

  // The top bar names the principal and its role; what a viewer may not do is disabled,
  // saying why (the server would answer 403 naming the role needed).
  await expect(page.getByLabel('Signed in as')).toHaveText(/e2e-viewer\s*viewer/);
  await row.getByRole('button', { name: NAME }).click();
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: `${KIND}/${NAME}` })).toBeVisible();
  // Its watch carries the token too (the browser's EventSource could not): the panel is live.
  await expect(panel.locator('.live-badge')).toHaveText('live');
  const actions = panel.getByLabel('Actions');
  for (const name of ['Reconcile', 'Quarantine', 'Delete…']) {
    const b = actions.getByRole('button', { name, exact: true });
    await expect(b).toBeDisabled();
    await expect(b).toHaveAttribute('title', 'Needs role operator; e2e-viewer has role viewer.');
  }
  const history = panel.getByRole('region', { name: 'History' });
  await expect(history.getByRole('list', { name: 'Spec generations' }).locator('li')).toHaveCount(2);
  const rollback = history.getByRole('button', { name: 'Roll back to this generation…' });
  await expect(rollback).toBeDisabled();
  await expect(rollback).toHaveAttribute('title', 'Needs role operator; e2e-viewer has role viewer.');
  await shot(page, '13-viewer-disabled');

  // Sign out forgets the token and asks again; nothing read with it stays on screen.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page.getByLabel('API token')).toBeVisible();
  await expect(page.locator('table.resource-table')).toHaveCount(0);
  expect(await page.evaluate(() => sessionStorage.getItem('converge.token'))).toBeNull();
});

test('an operator may act: the actions and the rollback are enabled', async ({ page }) => {
  const operator = process.env.E2E_AUTH_OPERATOR_TOKEN!;
  expect(operator).toBeTruthy();
  await page.goto(ui(`/resources/list/r/${KIND}/${NAME}`));
  await page.getByLabel('API token').fill(operator);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page.getByLabel('Signed in as')).toHaveText(/e2e-operator\s*operator/);
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: `${KIND}/${NAME}` })).toBeVisible();
  const actions = panel.getByLabel('Actions');
  for (const name of ['Reconcile', 'Quarantine', 'Delete…']) {
    const b = actions.getByRole('button', { name, exact: true });
    await expect(b).toBeEnabled();
    await expect(b).not.toHaveAttribute('title');
  }
  const history = panel.getByRole('region', { name: 'History' });
  await expect(history.getByRole('list', { name: 'Spec generations' }).locator('li')).toHaveCount(2);
  await expect(history.getByRole('button', { name: 'Roll back to this generation…' })).toBeEnabled();
  await shot(page, '14-operator-enabled');

  // Kinds and provider configs need admin; reactor bindings, operator.
  const nav = page.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Kinds' }).click();
  const applyManifest = page.getByRole('button', { name: 'Apply a manifest…' });
  await expect(applyManifest).toBeDisabled();
  await expect(applyManifest).toHaveAttribute('title', 'Needs role admin; e2e-operator has role operator.');
  await nav.getByRole('link', { name: 'Provider configs' }).click();
  await expect(page.getByRole('button', { name: 'New config…' })).toBeDisabled();
  await nav.getByRole('link', { name: 'Reactor bindings' }).click();
  await expect(page.getByRole('button', { name: 'New binding…' })).toBeEnabled();

  // The activity feed names who did what: the admin's applies, newest first, linking to it.
  await nav.getByRole('link', { name: 'Activity' }).click();
  const feed = page.getByRole('table', { name: 'Activity' });
  const created = feed.locator('tbody tr', { hasText: 'created' });
  await expect(created).toHaveCount(1);
  await expect(created.locator('td.actor')).toHaveText('e2e-admin');
  await expect(created).toContainText(`${KIND}/${NAME}`);
  await expect(page.locator('.activity-page .live-badge')).toHaveText('live');
  await expect(page.getByRole('button', { name: 'No older events' })).toBeDisabled();
  await shot(page, '15-activity');
  await created.getByRole('link', { name: `${KIND}/${NAME}` }).click();
  await expect(page.getByRole('complementary', { name: 'Resource detail' }).getByRole('heading', { name: `${KIND}/${NAME}` })).toBeVisible();
});
