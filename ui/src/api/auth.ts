// The API token of this browser tab and the sign-in state the app renders from.
//
// The token lives in sessionStorage only: it is gone when the tab closes and is never shared
// with other tabs or written to localStorage (where it would outlive the session). The API
// client reads it for every call and reports a 401 here; the app shows the sign-in prompt
// while `prompt` is set. A token may be pasted (an API token, or any bearer converge takes) or
// come from the sign-in through the OIDC issuer (api/oidc.ts: its ID token); the latter is
// marked with the issuer's URL, so that its refusal can be told as an expired sign-in.

import { useSyncExternalStore } from 'react';
import { issuerLabel, jwtExpiry } from './oidc';

/** sessionStorage key of the token. */
export const TOKEN_KEY = 'converge.token';
/** sessionStorage key of the issuer the token came from, when it came from the OIDC sign-in. */
export const ISSUER_KEY = 'converge.token.issuer';

export interface AuthState {
  /** The server answered 401: ask for a token. */
  prompt: boolean;
  /** The last token sent was refused (unknown or revoked), so the prompt says so. */
  rejected: boolean;
  /** A token is stored for this tab (the app offers "Sign out"). */
  signedIn: boolean;
  /** What the prompt says first: an expired or failed sign-in through the issuer. */
  message: string | null;
}

function storage(): Storage | null {
  // Storage can be unavailable (privacy modes, sandboxed frames): then there is no token.
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

/** The token to send, if this tab has one. */
export function getToken(): string | null {
  return storage()?.getItem(TOKEN_KEY) || null;
}

let state: AuthState = { prompt: false, rejected: false, signedIn: getToken() !== null, message: null };
const listeners = new Set<() => void>();

function set(next: AuthState) {
  state = next;
  listeners.forEach((l) => l());
}

export function authState(): AuthState {
  return state;
}

export function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Keeps `token` for this tab and closes the prompt; `issuer`: the OIDC issuer it came from
 * (its ID token), absent for a pasted token. */
export function signIn(token: string, issuer?: string) {
  const t = token.trim();
  if (!t) return;
  storage()?.setItem(TOKEN_KEY, t);
  if (issuer) storage()?.setItem(ISSUER_KEY, issuer);
  else storage()?.removeItem(ISSUER_KEY);
  set({ prompt: false, rejected: false, signedIn: true, message: null });
}

function forget() {
  storage()?.removeItem(TOKEN_KEY);
  storage()?.removeItem(ISSUER_KEY);
}

/** Forgets the token. Only a server that asked for one got one, so the prompt comes back at
 * once instead of after the next call fails. */
export function signOut() {
  forget();
  set({ prompt: true, rejected: false, signedIn: false, message: null });
}

/** The sign-in through the issuer failed (`why`): back to the prompt, saying so. */
export function signInFailed(why: string) {
  forget();
  set({ prompt: true, rejected: false, signedIn: false, message: `Signing in through the issuer failed: ${why}.` });
}

/** A call answered 401 after sending `sent` (null: no token was sent). */
export function unauthorized(sent: string | null) {
  // A refusal of a token that has since been replaced, or of a call sent before the sign-in
  // (a slow call racing it), says nothing about the token held now.
  if (sent !== getToken()) return;
  // A tokenless call refused while the prompt is up (a poll) learns nothing new, and must not
  // wipe what the prompt says about the token refused before it.
  if (sent === null && state.prompt) return;
  const issuer = storage()?.getItem(ISSUER_KEY) ?? null;
  if (sent !== null) forget();
  let message: string | null = null;
  if (sent !== null && issuer) {
    // The server allows a minute of clock skew past `exp`; the token's own `exp` tells an
    // expired sign-in from one refused for another reason (its key withdrawn, its role gone).
    const exp = jwtExpiry(sent);
    message =
      exp !== undefined && exp * 1000 <= Date.now()
        ? `Your sign-in through ${issuerLabel(issuer)} has expired. Sign in again.`
        : `The server no longer accepts your sign-in through ${issuerLabel(issuer)}. Sign in again.`;
  }
  set({ prompt: true, rejected: sent !== null, signedIn: false, message });
}

/** The sign-in state, re-rendering on change. */
export function useAuth(): AuthState {
  return useSyncExternalStore(subscribe, authState);
}

/** Test hook: back to a fresh tab's state. */
export function resetAuthForTests() {
  forget();
  set({ prompt: false, rejected: false, signedIn: false, message: null });
}
