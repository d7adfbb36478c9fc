import { expect, test, type Page } from '@playwright/test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BOM = 'demo-bom';
const FAILING = 'payments-alpha-route';
const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test-results/screenshots');
const ui = (p: string) => `${process.env.E2E_UI_BASE}${p}`;
const api = (p: string) => `${process.env.E2E_API}${p}`;
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
const owner = `owner=${encodeURIComponent(`classicbom/${BOM}`)}`;

const rows = (page: Page) => page.locator('table.resource-table tbody tr');
const row = (page: Page, ref: string) => page.locator(`table.resource-table tbody tr[data-ref="${ref}"]`);

test.describe.configure({ mode: 'serial' });

test('the list shows the BOM children with their phases', async ({ page }) => {
  await page.goto(ui(`/resources/list?${owner}&limit=50`));
  await expect(page.getByText('24 resources · page 1')).toBeVisible();
  await expect(rows(page)).toHaveCount(24);
  await expect(row(page, `route/${FAILING}`).locator('.phase')).toHaveText('Failed');
  await expect(row(page, 'vpc/payments-alpha-vpc').locator('.phase')).toHaveText('Ready');
  await expect(page.locator('table.resource-table .phase', { hasText: 'Ready' })).toHaveCount(23);
  // Problems first (the server's order): the failed child heads the list, oldest first puts
  // it back in creation order.
  await expect(rows(page).first()).toHaveAttribute('data-ref', `route/${FAILING}`);
  await page.getByRole('combobox', { name: /order/ }).selectOption('oldest first');
  await expect(page).toHaveURL(/sort=created/);
  await expect(rows(page).first()).not.toHaveAttribute('data-ref', `route/${FAILING}`);
  await expect(row(page, `route/${FAILING}`).locator('.phase')).toHaveText('Failed');
  await shot(page, '01-list');
  // Keyset pages of 10: Next, Next, Prev; every child seen exactly once.
  await page.goto(ui(`/resources/list?${owner}&limit=10`));
  const seen: string[] = [];
  const settled = page.locator('section[aria-label="Resource list"][aria-busy="false"]');
  const names = async () => (await settled.waitFor(), await rows(page).evaluateAll((trs) => trs.map((t) => t.getAttribute('data-ref') ?? '')));
  await expect(page.getByText('10 resources · page 1')).toBeVisible();
  seen.push(...(await names()));
  await page.getByRole('button', { name: 'Next →' }).click();
  await expect(page.getByText('10 resources · page 2')).toBeVisible();
  seen.push(...(await names()));
  await page.getByRole('button', { name: 'Next →' }).click();
  await expect(page.getByText('4 resources · page 3')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Next →' })).toBeDisabled();
  seen.push(...(await names()));
  expect(new Set(seen).size).toBe(24);
  await page.getByRole('button', { name: '← Prev' }).click();
  await expect(page.getByText('10 resources · page 2')).toBeVisible();
  await shot(page, '01b-list-page-2');
});

test('two phase chips show the union of both phases', async ({ page }) => {
  await page.goto(ui(`/resources/list?${owner}`));
  await expect(page.getByText('24 resources · page 1')).toBeVisible();
  const chips = page.getByRole('group', { name: 'Phase filter' });
  await chips.getByRole('button', { name: 'Failed' }).click();
  await expect(page.getByText('1 resource · page 1')).toBeVisible();
  await expect(rows(page)).toHaveCount(1);
  await chips.getByRole('button', { name: 'Ready' }).click();
  await expect(page.getByText('24 resources · page 1')).toBeVisible();
  await expect(page).toHaveURL(/phase=Ready/);
  await expect(page).toHaveURL(/phase=Failed/);
  const phases = await page.locator('table.resource-table .phase').allTextContents();
  expect(new Set(phases)).toEqual(new Set(['Ready', 'Failed']));
  await shot(page, '02-phase-union');
  await chips.getByRole('button', { name: 'Failed' }).click();
  await expect(page.getByText('23 resources · page 1')).toBeVisible();
});

test('the detail panel of a child shows its conditions', async ({ page }) => {
  await page.goto(ui(`/resources/list?${owner}`));
  await row(page, `route/${FAILING}`).getByRole('button', { name: FAILING }).click();
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: `route/${FAILING}` })).toBeVisible();
  const conditions = panel.getByRole('table', { name: 'Conditions' });
  await expect(conditions).toContainText('Synced');
  await expect(conditions).toContainText('False');
  await expect(conditions).toContainText('TerminalError');
  await expect(conditions).toContainText('spec.fail asks for a terminal failure');
  await expect(panel.getByRole('note', { name: 'Failure' })).toContainText('Terminal failure');
  await expect(panel.getByRole('list', { name: 'Recent events' })).toContainText('Reconciling → Failed');
  await expect(page).toHaveURL(new RegExp(`/resources/list/r/route/${FAILING}`));
  await shot(page, '03-detail-conditions');
  // The Owner cell opens the owner.
  await row(page, `route/${FAILING}`).getByRole('button', { name: `classicbom/${BOM}` }).click();
  await expect(panel.getByRole('heading', { name: `classicbom/${BOM}` })).toBeVisible();
});

test('the graph view renders the DAG with the path to the failed node', async ({ page }) => {
  // Without a root: the roots, paged, with their phase and size; choosing one draws it.
  await page.goto(ui('/resources/graph'));
  const bom = page.getByRole('table', { name: 'Roots' }).locator(`tr[data-ref="classicbom/${BOM}"]`);
  await expect(bom.locator('.phase')).toHaveText('Degraded');
  await expect(bom.locator('td').nth(2)).toHaveText('24');
  await bom.getByRole('button', { name: `classicbom/${BOM}` }).click();
  await expect(page).toHaveURL(/owner=classicbom%2Fdemo-bom/);
  await expect(page.locator('.react-flow__node')).toHaveCount(25);
  await page.goto(ui(`/resources/graph?${owner}`));
  await expect(page.locator('.react-flow__node')).toHaveCount(25);
  await expect(page.getByText('25 nodes, 24 dependency edges')).toBeVisible();
  await expect(page.locator('.react-flow__edge.edge-dep')).toHaveCount(24);
  await expect(page.locator('.react-flow__edge-text', { hasText: 'tgw_id' }).first()).toBeAttached();
  await expect(page.locator(`.react-flow__node[data-id="route/${FAILING}"]`)).toHaveClass(/node-Failed/);
  await expect(page.locator(`.react-flow__node[data-id="route/${FAILING}"]`)).toHaveClass(/on-failed-path/);
  await expect(page.locator('.react-flow__edge.on-failed-path')).toHaveCount(1);
  await shot(page, '04-graph');
  await page.locator(`.react-flow__node[data-id="route/${FAILING}"]`).click();
  await expect(page.getByRole('complementary', { name: 'Resource detail' }).getByRole('heading', { name: `route/${FAILING}` })).toBeVisible();
  // A smaller cap shows the truncation note.
  await page.goto(ui(`/resources/graph?${owner}&glimit=10`));
  await expect(page.getByText('Showing 10 of 25 nodes', { exact: false })).toBeVisible();
});

test('quarantining the failed child from the UI makes the root Ready', async ({ page }) => {
  await page.goto(ui(`/resources/list/r/route/${FAILING}?${owner}`));
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.locator('.facts .phase').first()).toHaveText('Failed');
  // The panel and the views follow the API's watches rather than polling.
  await expect(panel.locator('.live-badge')).toHaveText('live');
  await expect(page.getByRole('navigation', { name: 'Resource views' }).locator('.live-badge')).toHaveText('live');
  await panel.getByRole('button', { name: 'Quarantine' }).click();
  await expect(panel.locator('.facts .phase').first()).toHaveText('Quarantined');
  await expect(panel.getByRole('button', { name: 'Unquarantine' })).toBeVisible();
  await panel.getByRole('button', { name: `classicbom/${BOM}` }).click();
  await expect(panel.getByRole('heading', { name: `classicbom/${BOM}` })).toBeVisible();
  await expect(panel.locator('.facts .phase').first()).toHaveText('Ready', { timeout: 30_000 });
  await expect(panel.getByRole('table', { name: 'Conditions' })).toContainText('AllChildrenReady');
  const root = await (await fetch(api(`/resources/classicbom/${BOM}`))).json();
  expect(root.phase).toBe('Ready');
  await shot(page, '05-quarantine-root-ready');
});

test('the summary counts phases and kinds, and works on a narrow window', async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 800 });
  await page.goto(ui(`/resources/summary?${owner}`));
  const totals = page.getByLabel('Totals per phase');
  await expect(totals.locator('[data-phase="Ready"] .total-n')).toHaveText('23');
  await expect(totals.locator('[data-phase="Quarantined"] .total-n')).toHaveText('1');
  await expect(page.getByRole('table', { name: 'Counts per kind' })).toContainText('route');
  await shot(page, '06-summary-narrow');
});

test('applying a bad manifest shows the server validation errors inline', async ({ page }) => {
  await page.goto(ui('/kinds'));
  await expect(page.getByRole('table', { name: 'Kinds' })).toContainText('classicbom');
  await page.getByRole('button', { name: 'Apply a manifest…' }).click();
  const editor = page.getByRole('region', { name: 'Apply manifest' });
  await editor.getByLabel('Manifest JSON').fill(JSON.stringify({ kind: 'broken', kind_version: 1, reactions: [{ name: 'x', trigger: 'nonsense' }] }));
  await editor.getByRole('button', { name: 'Apply' }).click();
  await expect(editor.getByRole('alert')).toContainText('422');
  await shot(page, '07-kinds-invalid-manifest');
});

test('the operational config of a kind is edited with the server errors per field', async ({ page }) => {
  await page.goto(ui('/kinds?kind=route&v=1'));
  const form = page.getByRole('form', { name: 'Operational config' });
  const cap = form.locator('input[name="max_inflight"]');
  await expect(cap).toHaveValue('0');
  await cap.fill('-1');
  await form.getByRole('button', { name: 'Save config' }).click();
  await expect(form.locator('.field-error')).toContainText('must not be negative');
  await cap.fill('5');
  await form.getByRole('button', { name: 'Save config' }).click();
  await expect(form.getByText('Saved; applies to the next task.')).toBeVisible();
  await expect(page.locator('tr[data-kind="route@1"] td').nth(3)).toHaveText('5');
  const cfg = await (await fetch(api('/kinds/route/versions/1/config'))).json();
  expect(cfg.max_inflight).toBe(5);
  await shot(page, '08-kind-config');
});

test('provider configs are created, edited and deleted, with validation errors shown', async ({ page }) => {
  await page.goto(ui('/providerconfigs'));
  await expect(page.getByText('No provider configs.')).toBeVisible();
  await page.getByRole('button', { name: 'New config…' }).click();
  const form = page.getByRole('form', { name: 'Provider config' });
  await form.locator('input[name="name"]').fill('sink-dir');
  await form.locator('select[name="kind"]').selectOption('statussink@1');
  await form.locator('textarea[name="spec"]').fill('{"url": "ftp://nowhere"}');
  await form.getByRole('button', { name: 'Save' }).click();
  await expect(form.getByRole('alert').first()).toContainText('422');
  await expect(form).toContainText('/spec/url');
  await shot(page, '09-providerconfig-invalid');
  await form.locator('textarea[name="spec"]').fill('{"directory": "/tmp/converge-sink"}');
  await form.getByText('the default config of this kind version').click();
  await form.getByRole('button', { name: 'Save' }).click();
  const table = page.getByRole('table', { name: 'Provider configs' });
  const row = table.locator('tr', { hasText: 'sink-dir' });
  await expect(row).toContainText('statussink v1');
  await expect(row).toContainText('default');
  await row.getByRole('button', { name: 'Edit' }).click();
  await expect(form.locator('input[name="name"]')).toHaveValue('sink-dir');
  await form.locator('textarea[name="spec"]').fill('{"directory": "/tmp/converge-sink-2"}');
  await form.getByRole('button', { name: 'Save' }).click();
  await expect(row).toContainText('converge-sink-2');
  await row.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await expect(page.getByText('No provider configs.')).toBeVisible();
});

test('reactor bindings are created, edited and deleted, with validation errors shown', async ({ page }) => {
  await page.goto(ui('/reactor-bindings'));
  await expect(page.getByText('No reactor bindings.')).toBeVisible();
  await page.getByRole('button', { name: 'New binding…' }).click();
  const form = page.getByRole('form', { name: 'Reactor binding' });
  await form.locator('input[name="name"]').fill('bad name');
  await form.locator('input[name="watch_kind"]').fill('nosuchkind');
  await form.locator('input[name="reactor"]').fill('statussink');
  await form.getByRole('button', { name: 'Save' }).click();
  await expect(form.locator('.field-error').first()).toBeVisible();
  await expect(form).toContainText('is not registered');
  await expect(form).toContainText('printable ASCII');
  await shot(page, '10-binding-invalid');
  await form.locator('input[name="name"]').fill('bom-synced');
  await form.locator('input[name="watch_kind"]').fill('classicbom');
  await form.locator('select[name="transition"]').selectOption('synced');
  await form.getByRole('button', { name: 'Save' }).click();
  const row = page.getByRole('table', { name: 'Reactor bindings' }).locator('tr', { hasText: 'bom-synced' });
  await expect(row).toContainText('classicbom synced');
  await row.getByRole('button', { name: 'Edit' }).click();
  await form.locator('input[name="labels"]').fill('team:alpha');
  await form.getByRole('button', { name: 'Save' }).click();
  await expect(row).toContainText('team:alpha');
  await row.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await expect(page.getByText('No reactor bindings.')).toBeVisible();
});

test('the cluster page lists converge, the classic worker and who serves each kind', async ({ page }) => {
  await page.goto(ui('/cluster'));
  const members = page.getByRole('table', { name: 'Members' });
  await expect(members.locator('tbody tr')).toHaveCount(1);
  await expect(members.locator('tbody tr').first().locator('td').first()).toHaveText('all');
  const worker = page.getByRole('table', { name: 'Workers' }).locator('tr[data-worker="ui-e2e"]');
  await expect(worker).toContainText('classicbom v1');
  await expect(worker).not.toContainText('not registered');
  const bom = page.getByRole('table', { name: 'Kind coverage' }).locator('tr[data-kind="classicbom@1"]');
  await expect(bom.locator('td').nth(2)).toHaveText('1');
  await shot(page, '11-cluster');
});
