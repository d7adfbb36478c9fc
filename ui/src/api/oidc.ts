// Sign-in through the OIDC issuer converge trusts (`GET /auth/config`): the authorization
// code flow with PKCE for a public client (no secret), done with oauth4webapi.
//
// 1. `beginSignIn` reads the issuer's discovery document (the browser fetches it: the CSP's
//    connect-src names the issuer's origin), keeps a fresh PKCE verifier, `state` and `nonce`
//    in sessionStorage for this tab, and sends the page to the issuer's authorization
//    endpoint with the S256 challenge and `redirect_uri` = this origin's `/oidc-callback`
//    (converge serves the SPA at every non-API path).
// 2. The issuer sends the browser back to `/oidc-callback?code=...&state=...`;
//    `completeSignIn` takes the pending sign-in (once: it is removed whatever happens), checks
//    the `state`, posts the code and the verifier to the token endpoint (connect-src names its
//    origin too), and checks the ID token's claims: `iss`, `aud` = the client id, `exp`, `iat`
//    and `nonce` = the one sent. Its signature is the server's to check (it does, on every
//    call, against the issuer's JWKS); the UI got it straight from the token endpoint.
//
// Which token the UI sends: the ID token. Its `aud` is the UI's client id, which is what
// converge checks (`OIDC_AUDIENCE` defaults to `OIDC_CLIENT_ID`); an access token is often
// opaque, or a JWT for another audience (the issuer's own APIs), so converge could not take
// it. The ID token is kept like a pasted token (api/auth.ts: sessionStorage, this tab only).

import * as oauth from 'oauth4webapi';
import type { OidcConfig } from './types';

/** The UI's route the issuer sends the browser back to. */
export const CALLBACK_PATH = '/oidc-callback';
/** sessionStorage key of the sign-in under way (verifier, state, nonce). */
export const PENDING_KEY = 'converge.oidc.pending';

interface Pending {
  issuer: string;
  clientId: string;
  verifier: string;
  state: string;
  nonce: string;
  /** Where the person was (path and query) when they chose to sign in. */
  returnTo: string;
}

/** What a completed sign-in gives. */
export interface SignedIn {
  idToken: string;
  issuer: string;
  returnTo: string;
}

/** The redirect URI of this origin, the same at both ends of the flow. */
export function redirectUri(): string {
  return `${window.location.origin}${CALLBACK_PATH}`;
}

/** How the issuer is named on the button: its host and path (`kc.example/realms/acme`). */
export function issuerLabel(issuer: string): string {
  try {
    const u = new URL(issuer);
    return `${u.host}${u.pathname.replace(/\/$/, '')}`;
  } catch {
    return issuer;
  }
}

// converge takes a plain-http issuer only on loopback or with OIDC_INSECURE_HTTP set on
// purpose (SECURITY.md); the UI follows the issuer converge was given.
function transport(url: string): { [oauth.allowInsecureRequests]?: boolean } {
  return new URL(url).protocol === 'http:' ? { [oauth.allowInsecureRequests]: true } : {};
}

async function discover(issuer: string): Promise<oauth.AuthorizationServer> {
  const url = new URL(issuer);
  let resp: Response;
  try {
    resp = await oauth.discoveryRequest(url, { algorithm: 'oidc', ...transport(issuer) });
  } catch (e) {
    throw new Error(`cannot reach the issuer ${issuer}: ${(e as Error).message}`);
  }
  return oauth.processDiscoveryResponse(url, resp);
}

function storage(): Storage {
  return window.sessionStorage;
}

/** A path of this UI to go back to (never another origin, never the callback itself). */
function safeReturn(p: string | undefined): string {
  return p && /^\/(?![/\\])/.test(p) && !p.startsWith(CALLBACK_PATH) ? p : '/';
}

/** Starts the sign-in: to the issuer's sign-in page (`go`: how the page is sent there),
 * coming back to `returnTo`. */
export async function beginSignIn(
  cfg: OidcConfig,
  returnTo: string,
  go: (url: string) => void = (u) => window.location.assign(u),
): Promise<void> {
  const as = await discover(cfg.issuer);
  if (!as.authorization_endpoint) throw new Error(`the issuer ${cfg.issuer} publishes no authorization endpoint`);
  const pending: Pending = {
    issuer: cfg.issuer,
    clientId: cfg.client_id,
    verifier: oauth.generateRandomCodeVerifier(),
    state: oauth.generateRandomState(),
    nonce: oauth.generateRandomNonce(),
    returnTo: safeReturn(returnTo),
  };
  const url = new URL(as.authorization_endpoint);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', cfg.client_id);
  url.searchParams.set('redirect_uri', redirectUri());
  url.searchParams.set('scope', cfg.scopes || 'openid');
  url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(pending.verifier));
  url.searchParams.set('code_challenge_method', 'S256');
  url.searchParams.set('state', pending.state);
  url.searchParams.set('nonce', pending.nonce);
  storage().setItem(PENDING_KEY, JSON.stringify(pending));
  go(url.href);
}

function takePending(): Pending | null {
  const raw = storage().getItem(PENDING_KEY);
  // One use: a reloaded or replayed callback finds nothing to complete.
  storage().removeItem(PENDING_KEY);
  if (!raw) return null;
  try {
    return JSON.parse(raw) as Pending;
  } catch {
    return null;
  }
}

/** Why oauth4webapi refused, in words for the sign-in page. */
function explain(e: unknown): string {
  if (e instanceof oauth.AuthorizationResponseError) {
    return `the issuer refused: ${e.error}${e.error_description ? ` (${e.error_description})` : ''}`;
  }
  if (e instanceof oauth.ResponseBodyError) {
    return `the issuer refused the code exchange: ${e.error}${e.error_description ? ` (${e.error_description})` : ''}`;
  }
  const m = (e as Error)?.message ?? String(e);
  if (/"state"/.test(m)) {
    return 'the answer does not belong to the sign-in this tab started (its state differs), so it was refused';
  }
  if (/"nonce"/.test(m)) return 'the ID token was not issued for this sign-in (its nonce differs), so it was refused';
  return m;
}

/** Completes the sign-in the issuer sent the browser back from (`callback`: this page's URL). */
export async function completeSignIn(callback: URL): Promise<SignedIn> {
  const pending = takePending();
  if (!pending) {
    throw new Error('no sign-in was started in this tab (or it was already completed); start again');
  }
  try {
    const as = await discover(pending.issuer);
    const client: oauth.Client = { client_id: pending.clientId };
    const params = oauth.validateAuthResponse(as, client, callback, pending.state);
    const resp = await oauth.authorizationCodeGrantRequest(
      as,
      client,
      oauth.None(),
      params,
      redirectUri(),
      pending.verifier,
      transport(as.token_endpoint ?? pending.issuer),
    );
    const result = await oauth.processAuthorizationCodeResponse(as, client, resp, {
      expectedNonce: pending.nonce,
      requireIdToken: true,
    });
    if (!result.id_token) throw new Error('the issuer answered no ID token');
    return { idToken: result.id_token, issuer: pending.issuer, returnTo: safeReturn(pending.returnTo) };
  } catch (e) {
    throw new Error(explain(e));
  }
}

/** The `exp` of a JWT (seconds), read without checking anything: only to word a message. */
export function jwtExpiry(token: string): number | undefined {
  try {
    const part = token.split('.')[1];
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
    const exp = (JSON.parse(json) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp : undefined;
  } catch {
    return undefined;
  }
}
