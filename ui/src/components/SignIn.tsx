// The sign-in prompt shown when the API answers 401: one password-type field for the API
// token, kept for this tab only (see api/auth.ts).

import { useState } from 'react';
import { signIn, useAuth } from '../api/auth';

export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const { rejected } = useAuth();
  const [token, setToken] = useState('');
  return (
    <section className="sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      <p>
        This converge requires an API token. Paste the token you were given (an administrator makes one with{' '}
        <code>converge token new</code>); a viewer token can read, an operator or admin token can also change things.
      </p>
      <p className="muted">
        The token is kept for this browser tab only (session storage, not saved to disk) and sent with every API call.
        Closing the tab or signing out forgets it.
      </p>
      {rejected && (
        <div className="error" role="alert">
          The server did not accept that token (unknown or revoked). Check it and try again.
        </div>
      )}
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
