// The page the OIDC issuer sends the browser back to (`/oidc-callback?code=...&state=...`):
// completes the sign-in (api/oidc.ts: state, code exchange with the PKCE verifier, the ID
// token's nonce), keeps the ID token for the tab and returns to where the person was; on any
// failure, back to the sign-in prompt saying why.

import { useEffect } from 'react';
import { useLocation, useNavigate } from 'react-router-dom';
import { signIn, signInFailed } from '../api/auth';
import { CALLBACK_PATH, completeSignIn, type SignedIn } from '../api/oidc';

// One completion per callback URL: React's StrictMode runs effects twice in development, and
// the pending sign-in can be taken only once.
const completions = new Map<string, Promise<SignedIn>>();

export function OidcCallback({ onSignedIn }: { onSignedIn: () => void }) {
  const { search } = useLocation();
  const navigate = useNavigate();
  useEffect(() => {
    const url = new URL(`${window.location.origin}${CALLBACK_PATH}${search}`);
    let done = completions.get(url.href);
    if (!done) {
      done = completeSignIn(url);
      completions.set(url.href, done);
    }
    let live = true;
    done.then(
      (s) => {
        if (!live) return;
        signIn(s.idToken, s.issuer);
        onSignedIn();
        navigate(s.returnTo, { replace: true });
      },
      (e: Error) => {
        if (!live) return;
        signInFailed(e.message);
        navigate('/', { replace: true });
      },
    );
    return () => {
      live = false;
    };
  }, [search, navigate, onSignedIn]);
  return (
    <section className="sign-in" aria-busy="true">
      <p>Signing you in…</p>
    </section>
  );
}
