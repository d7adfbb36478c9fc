// The sign-in prompt shown when the API answers 401: "Sign in with <issuer>" when converge
// signs people in through an OIDC issuer (`GET /auth/config`; api/oidc.ts), and always the
// password-type field for an API token, kept for this tab only (see api/auth.ts).

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useLocation } from 'react-router-dom';
import { signIn, useAuth } from '../api/auth';
import { api } from '../api/client';
import { beginSignIn, issuerLabel } from '../api/oidc';
import type { OidcConfig } from '../api/types';

/** "Sign in with <issuer>": off to the issuer, back at /oidc-callback. */
function IssuerSignIn({ oidc }: { oidc: OidcConfig }) {
  const location = useLocation();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const label = issuerLabel(oidc.issuer);
  return (
    <div className="oidc-sign-in">
      <button
        type="button"
        className="primary"
        disabled={busy}
        onClick={() => {
          setBusy(true);
          setError(null);
          beginSignIn(oidc, location.pathname + location.search).catch((e: Error) => {
            setBusy(false);
            setError(e.message);
          });
        }}
      >
        Sign in with {label}
      </button>
      <p className="muted">
        You sign in at {label} and come back here. The ID token it gives lives in this tab&apos;s session storage, like a
        pasted token, until it expires.
      </p>
      {error && (
        <div className="error" role="alert">
          Cannot start signing in through {label}: {error}
        </div>
      )}
    </div>
  );
}

export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const { rejected, message } = useAuth();
  const [token, setToken] = useState('');
  // Answers without a token; a converge older than the route answers 404: no issuer then.
  const config = useQuery({ queryKey: ['auth-config'], queryFn: api.authConfig, staleTime: 60_000, retry: false });
  const oidc = config.data?.oidc ?? null;
  return (
    <section className="sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      {message ? (
        <div className="error" role="alert">
          {message}
        </div>
      ) : (
        rejected && (
          <div className="error" role="alert">
            The server did not accept that token (unknown or revoked). Check it and try again.
          </div>
        )
      )}
      {oidc && <IssuerSignIn oidc={oidc} />}
      <p>
        {oidc ? 'Or paste an API token' : 'This converge requires an API token. Paste the token you were given'} (an
        administrator makes one with <code>converge token new</code>); a viewer token can read, an operator or admin token
        can also change things.
      </p>
      <p className="muted">
        The token is kept for this browser tab only (session storage, not saved to disk) and sent with every API call.
        Closing the tab or signing out forgets it.
      </p>
      <form
        aria-label="Sign in"
        onSubmit={(e) => {
          e.preventDefault();
          if (!token.trim()) return;
          signIn(token);
          setToken('');
          onSignedIn();
        }}
      >
        <label htmlFor="api-token">API token</label>
        <input
          id="api-token"
          name="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          autoFocus
          value={token}
          onChange={(e) => setToken(e.target.value)}
        />
        <button type="submit" className="primary" disabled={!token.trim()}>
          Sign in
        </button>
      </form>
    </section>
  );
}
