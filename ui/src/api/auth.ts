// The API token of this browser tab and the sign-in state the app renders from.
//
// The token lives in sessionStorage only: it is gone when the tab closes and is never shared
// with other tabs or written to localStorage (where it would outlive the session). The API
// client reads it for every call and reports a 401 here; the app shows the sign-in prompt
// while `prompt` is set.

import { useSyncExternalStore } from 'react';

/** sessionStorage key of the token. */
export const TOKEN_KEY = 'converge.token';

export interface AuthState {
  /** The server answered 401: ask for a token. */
  prompt: boolean;
  /** The last token sent was refused (unknown or revoked), so the prompt says so. */
  rejected: boolean;
  /** A token is stored for this tab (the app offers "Sign out"). */
  signedIn: boolean;
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

let state: AuthState = { prompt: false, rejected: false, signedIn: getToken() !== null };
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

/** Keeps `token` for this tab and closes the prompt. */
export function signIn(token: string) {
  const t = token.trim();
  if (!t) return;
  storage()?.setItem(TOKEN_KEY, t);
  set({ prompt: false, rejected: false, signedIn: true });
}

/** Forgets the token. Only a server that asked for one got one, so the prompt comes back at
 * once instead of after the next call fails. */
export function signOut() {
  storage()?.removeItem(TOKEN_KEY);
  set({ prompt: true, rejected: false, signedIn: false });
}

/** A call answered 401 after sending `sent` (null: no token was sent). */
export function unauthorized(sent: string | null) {
  // A refusal of a token that has since been replaced, or of a call sent before the sign-in
  // (a slow call racing it), says nothing about the token held now.
  if (sent !== getToken()) return;
  if (sent !== null) storage()?.removeItem(TOKEN_KEY);
  set({ prompt: true, rejected: sent !== null, signedIn: false });
}

/** The sign-in state, re-rendering on change. */
export function useAuth(): AuthState {
  return useSyncExternalStore(subscribe, authState);
}

/** Test hook: back to a fresh tab's state. */
export function resetAuthForTests() {
  storage()?.removeItem(TOKEN_KEY);
  set({ prompt: false, rejected: false, signedIn: false });
}
