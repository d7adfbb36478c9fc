// Editing a spec against the real converge of global-setup.ts: the edit dialog shows the
// server's plan (`POST /resources:plan`) before anything is saved (the diff, or the apply's
// problem for a spec the kind refuses), saving is only possible for a reviewed spec, and a
// saved spec is the next generation. The classic BOM's composer is an SDK worker's: its plan
// composes through a dry run on that worker and lists what would change in its children.

import { expect, test, type Page } from '@playwright/test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test-results/screenshots');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
const ui = (p: string) => `${process.env.E2E_UI_BASE}${p}`;
const api = (p: string) => `${process.env.E2E_API}${p}`;

const spec = (region: string) => JSON.stringify({ domain: 'plan', team: 'alpha', region }, null, 2);

async function generation(name: string): Promise<number> {
  const r = await fetch(api(`/resources/account/${name}`));
  expect(r.ok).toBe(true);
  return ((await r.json()) as { generation: number }).generation;
}

test('the edit dialog shows the plan before a spec is saved', async ({ page }, info) => {
  // Its own resource per run (--repeat-each), so every run starts at generation 1.
  const name = `plan-acct-${info.repeatEachIndex}-${Date.now().toString(36)}`;
  const created = await fetch(api('/resources'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ kind: 'account', kind_version: 1, name, spec: JSON.parse(spec('us-east-1')) }),
  });
  expect(created.ok, `apply ${name}: ${created.status}`).toBe(true);

  await page.goto(ui(`/resources/list/r/account/${name}`));
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: `account/${name}` })).toBeVisible();
  await panel.getByRole('button', { name: 'Edit spec…' }).click();
  const dialog = page.getByRole('dialog', { name: `Edit account/${name}` });
  const editor = dialog.getByLabel('Spec JSON');
  const save = dialog.getByRole('button', { name: 'Save' });
  const review = dialog.getByRole('button', { name: 'Review changes' });

  await editor.fill(spec('eu-west-1'));
  await expect(save).toBeDisabled();
  await review.click();
  const plan = dialog.getByRole('region', { name: 'Plan' });
  await expect(plan).toContainText('would update this resource');
  await expect(plan.getByLabel('Plan diff').locator('.del')).toHaveText(['- /spec/region: "us-east-1"']);
  await expect(plan.getByLabel('Plan diff').locator('.add')).toHaveText(['+ /spec/region: "eu-west-1"']);
  await expect(save).toBeEnabled();
  expect(await generation(name), 'a review writes nothing').toBe(1);
  await shot(page, '20-plan-diff');

  // A spec the kind refuses: the apply's problem, located, and nothing to save.
  await editor.fill('{"domain": "plan", "team": "alpha", "region": ""}');
  await expect(save).toBeDisabled();
  await review.click();
  await expect(dialog.getByRole('alert')).toContainText('The apply would be refused');
  await expect(dialog.getByRole('alert')).toContainText('/spec/region');
  await expect(save).toBeDisabled();

  // Reviewed again, then saved: the next generation.
  await editor.fill(spec('eu-west-1'));
  await review.click();
  await expect(plan.getByLabel('Plan diff').locator('.add')).toHaveText(['+ /spec/region: "eu-west-1"']);
  await save.click();
  await expect(dialog).toHaveCount(0);
  await expect(panel.getByRole('status').filter({ hasText: 'Applied:' })).toHaveText('Applied: configured, generation 2.');
  expect(await generation(name)).toBe(2);
});

test('the plan of the classic BOM lists its children, composed by a dry run on its worker', async ({ page }) => {
  const before = await fetch(api('/resources/classicbom/demo-bom')).then((r) => r.json() as Promise<{ generation: number }>);
  await page.goto(ui('/resources/list/r/classicbom/demo-bom'));
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: 'classicbom/demo-bom' })).toBeVisible();
  await panel.getByRole('button', { name: 'Edit spec…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Edit classicbom/demo-bom' });
  const editor = dialog.getByLabel('Spec JSON');
  const current = JSON.parse(await editor.inputValue()) as Record<string, unknown>;
  await editor.fill(JSON.stringify({ ...current, region: 'plan-region-1' }, null, 2));
  await dialog.getByRole('button', { name: 'Review changes' }).click();
  const plan = dialog.getByRole('region', { name: 'Plan' });
  await expect(plan.getByLabel('Plan diff').locator('.add')).toHaveText(['+ /spec/region: "plan-region-1"']);
  // Every child carries the region: 18 change, the 6 without one do not; nothing is saved.
  await expect(plan.getByRole('heading', { name: /^Children: 0 added, 18 changed, 0 removed, 6 unchanged$/ })).toBeVisible();
  await expect(plan.getByRole('listitem').filter({ hasText: 'vpc/payments-alpha-vpc' })).toContainText('+ /spec/region: "plan-region-1"');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toHaveCount(0);
  const after = await fetch(api('/resources/classicbom/demo-bom')).then((r) => r.json() as Promise<{ generation: number }>);
  expect(after.generation).toBe(before.generation);
});
