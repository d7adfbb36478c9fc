// Sign-in through a real OIDC issuer (the `oidc-test-issuer` process of global-setup.ts:
// discovery, JWKS, /authorize, /token, ES256 keys of its own) against the converge that
// requires tokens (OIDC_ISSUER, OIDC_CLIENT_ID): the sign-in page offers "Sign in with
// <issuer>" beside the API token field; the authorization code flow with PKCE lands the
// person back where they were, signed in as oidc:<name> with their role (a viewer's write
// actions disabled, an operator's enabled), the ID token kept in sessionStorage only; a
// tampered `state` on the way back is refused before any code exchange; an expired ID token
// sends the person back to the sign-in page saying so; sign-out forgets it.

import { expect, test, type Page } from '@playwright/test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test-results/screenshots');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
const ui = (p: string) => `${process.env.E2E_AUTH_UI_BASE}${p}`;
const issuer = () => process.env.E2E_OIDC_ISSUER!;
const issuerButton = (page: Page) => page.getByRole('button', { name: `Sign in with ${new URL(issuer()).host}` });
const KIND = 'account';
const NAME = 'signed-in-acct';
const DETAIL = `/resources/list/r/${KIND}/${NAME}`;

/** Signs in through the issuer as `who` from the sign-in page now shown. */
async function signInAs(page: Page, who: string) {
  await issuerButton(page).click();
  // The issuer's own page: who signs in.
  await page.getByRole('link', { name: `Sign in as ${who}` }).click();
}

test('a viewer signs in through the issuer and sees write actions disabled', async ({ page }) => {
  expect(issuer()).toBeTruthy();
  const resp = await page.goto(ui(DETAIL));
  if (process.env.UI_FROM_CONVERGE === '1') {
    // converge's CSP lets the UI read the issuer's discovery document and reach its token
    // endpoint (same origin here), and nothing more.
    expect(resp?.headers()['content-security-policy']).toContain(`connect-src 'self' ${issuer()};`);
  }
  await expect(issuerButton(page)).toBeVisible();
  // The paste-a-token path stays.
  await expect(page.getByLabel('API token')).toBeVisible();
  await shot(page, '21-oidc-sign-in');

  await signInAs(page, 'vera');
  await expect(page.getByLabel('Signed in as')).toHaveText(/oidc:vera\s*viewer/);
  // Back where the person was, the callback's code and state gone from the address.
  await expect(page).toHaveURL(ui(DETAIL));
  const panel = page.getByRole('complementary', { name: 'Resource detail' });
  await expect(panel.getByRole('heading', { name: `${KIND}/${NAME}` })).toBeVisible();
  const actions = panel.getByLabel('Actions');
  for (const name of ['Reconcile', 'Quarantine', 'Delete…']) {
    const b = actions.getByRole('button', { name, exact: true });
    await expect(b).toBeDisabled();
    await expect(b).toHaveAttribute('title', 'Needs role operator; oidc:vera has role viewer.');
  }
  // The ID token (a JWT), for this tab only; the sign-in's verifier, state and nonce gone.
  const stored = await page.evaluate(() => ({
    token: sessionStorage.getItem('converge.token'),
    issuer: sessionStorage.getItem('converge.token.issuer'),
    pending: sessionStorage.getItem('converge.oidc.pending'),
    local: localStorage.length,
  }));
  expect(stored.token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
  expect({ ...stored, token: undefined }).toEqual({ token: undefined, issuer: issuer(), pending: null, local: 0 });
  await shot(page, '22-oidc-viewer');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(issuerButton(page)).toBeVisible();
  expect(await page.evaluate(() => [sessionStorage.getItem('converge.token'), sessionStorage.getItem('converge.token.issuer')])).toEqual([
    null,
    null,
  ]);
});

test('an operator signs in through the issuer and may act', async ({ page }) => {
  await page.goto(ui(DETAIL));
  await signInAs(page, 'otto');
  await expect(page.getByLabel('Signed in as')).toHaveText(/oidc:otto\s*operator/);
  const actions = page.getByRole('complementary', { name: 'Resource detail' }).getByLabel('Actions');
  for (const name of ['Reconcile', 'Quarantine', 'Delete…']) {
    await expect(actions.getByRole('button', { name, exact: true })).toBeEnabled();
  }
});

test('a tampered state on the way back is refused before any code exchange', async ({ page }) => {
  const exchanges: string[] = [];
  page.on('request', (r) => {
    if (r.url().startsWith(`${issuer()}/token`)) exchanges.push(r.method());
  });
  // Someone rewrites the issuer's redirect: the code comes back with another state.
  await page.route((u) => u.href.startsWith(`${issuer()}/authorize`), async (route) => {
    const r = await route.fetch({ maxRedirects: 0 });
    const location = r.headers()['location'];
    if (!location) return route.fulfill({ response: r });
    const back = new URL(location);
    back.searchParams.set('state', 'tampered');
    await route.fulfill({ status: 303, headers: { location: back.href } });
  });
  await page.goto(ui(DETAIL));
  await signInAs(page, 'vera');
  await expect(page.getByRole('alert')).toContainText('its state differs');
  await expect(issuerButton(page)).toBeVisible();
  await expect(page.getByLabel('Signed in as')).toHaveCount(0);
  expect(await page.evaluate(() => [sessionStorage.getItem('converge.token'), sessionStorage.getItem('converge.oidc.pending')])).toEqual([
    null,
    null,
  ]);
  expect(exchanges).toEqual([]);
  await shot(page, '23-oidc-tampered-state');
});

test('an expired sign-in goes back to the sign-in page saying so', async ({ page }) => {
  await page.goto(ui(DETAIL));
  await signInAs(page, 'vera');
  await expect(page.getByLabel('Signed in as')).toHaveText(/oidc:vera\s*viewer/);
  // The issuer's ID token for vera that expired an hour ago, in place of the fresh one: the
  // server answers 401 and the UI asks for a new sign-in.
  await page.evaluate((t) => sessionStorage.setItem('converge.token', t), process.env.E2E_OIDC_EXPIRED_TOKEN!);
  await page.reload();
  await expect(page.getByRole('alert')).toContainText(`Your sign-in through ${new URL(issuer()).host} has expired`);
  await expect(issuerButton(page)).toBeVisible();
  expect(await page.evaluate(() => sessionStorage.getItem('converge.token'))).toBeNull();
  await shot(page, '24-oidc-expired');
});
