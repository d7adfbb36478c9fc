// The spec history of a root against the real converge of global-setup.ts: a resource applied
// three times lists three generations newest first, shows the diff between a chosen one and
// the current spec, and rolls back to it (confirmed), which applies that spec as a new
// generation.

import { expect, test, type Page } from '@playwright/test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test-results/screenshots');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
const ui = (p: string) => `${process.env.E2E_UI_BASE}${p}`;
const api = (p: string) => `${process.env.E2E_API}${p}`;

async function apply(name: string, region: string) {
  const r = await fetch(api('/resources'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ kind: 'account', kind_version: 1, name, spec: { domain: 'history', team: 'alpha', region } }),
  });
  expect(r.ok, `apply ${name}: ${r.status} ${await r.text()}`).toBe(true);
}

test('the history of a root shows a diff and rolls back to a generation', async ({ page }, info) => {
  // Its own resource per run (--repeat-each), so every run starts at generation 1.
  const name = `history-acct-${info.repeatEachIndex}-${Date.now().toString(36)}`;
  for (const region of ['us-east-1', 'eu-west-1', 'ap-south-1']) await apply(name, region);

  await page.goto(ui(`/resources/list/r/account/${name}`));
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: `account/${name}` })).toBeVisible();
  const history = panel.getByRole('region', { name: 'History' });
  const generations = history.getByRole('list', { name: 'Spec generations' }).locator('li');
  await expect(generations).toHaveCount(3);
  await expect(generations.first()).toContainText('generation 3');
  await expect(generations.first()).toContainText('(current)');
  await expect(generations.last()).toContainText('generation 1');

  // By default the one before the current: the last apply's change.
  const diff = history.getByLabel('Spec diff');
  await expect(history.getByRole('heading', { name: 'Generation 2 → current (generation 3)' })).toBeVisible();
  await expect(diff.locator('.del')).toHaveText(['-   "region": "eu-west-1",']);
  await expect(diff.locator('.add')).toHaveText(['+   "region": "ap-south-1",']);

  await history.getByRole('button', { name: 'generation 1', exact: true }).click();
  await expect(history.getByRole('heading', { name: 'Generation 1 → current (generation 3)' })).toBeVisible();
  await expect(diff.locator('.del')).toHaveText(['-   "region": "us-east-1",']);
  await expect(diff.locator('.add')).toHaveText(['+   "region": "ap-south-1",']);
  await expect(diff.locator('.ctx', { hasText: '"team": "alpha"' })).toHaveCount(1);
  await shot(page, '16-history-diff');

  // Cancelling the confirmation changes nothing; confirming rolls back.
  await history.getByRole('button', { name: 'Roll back to this generation…' }).click();
  const dialog = page.getByRole('dialog', { name: `Roll account/${name} back to generation 1?` });
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toHaveCount(0);
  await history.getByRole('button', { name: 'Roll back to this generation…' }).click();
  await dialog.getByRole('button', { name: 'Roll back' }).click();
  await expect(history.getByRole('status')).toHaveText('Rolled back: generation 4 has the spec of generation 1.');

  // The spec is generation 1's again, as a new generation 4 at the top of the history.
  await expect(panel.getByLabel('Spec', { exact: true })).toContainText('"region": "us-east-1"');
  await expect(generations).toHaveCount(4);
  await expect(generations.first()).toContainText('generation 4');
  await expect(generations.first()).toContainText('(current)');
  const now = await (await fetch(api(`/resources/account/${name}`))).json();
  expect(now.generation).toBe(4);
  expect(now.spec.region).toBe('us-east-1');
  // Generation 1 is the current spec now: nothing to diff, nothing to roll back.
  await history.getByRole('button', { name: 'generation 1', exact: true }).click();
  await expect(history.getByText('Same as the current spec.')).toBeVisible();
  await expect(history.getByRole('button', { name: 'Roll back to this generation…' })).toBeDisabled();
  await shot(page, '17-history-rolled-back');
});
