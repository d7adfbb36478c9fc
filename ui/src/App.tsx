import { ApiError, api } from './api/client';
import { signOut, useAuth } from './api/auth';
import { NavLink, Navigate, Route, Routes, useLocation } from 'react-router-dom';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback } from 'react';
import { CALLBACK_PATH } from './api/oidc';
import { OidcCallback } from './components/OidcCallback';
import { SignIn } from './components/SignIn';
import { useWhoAmI } from './lib/permissions';
import { ProviderConfigsPage } from './pages/admin/ProviderConfigsPage';
import { ReactorBindingsPage } from './pages/admin/ReactorBindingsPage';
import { TokensPage } from './pages/admin/TokensPage';
import { ActivityPage } from './pages/activity/ActivityPage';
import { ClusterPage } from './pages/cluster/ClusterPage';
import { KindsPage } from './pages/kinds/KindsPage';
import { ResourcesPage } from './pages/resources/ResourcesPage';

function ApiStatus() {
  const q = useQuery({ queryKey: ['version'], queryFn: api.version, refetchInterval: 10_000, retry: false });
  // A 401/403 means the API answered; the sign-in prompt deals with it.
  if (q.error && !(q.error instanceof ApiError && q.error.status > 0)) return <span className="api-status down">API unreachable</span>;
  const v = q.data?.version;
  return <span className="api-status">{v ? `converge ${v}` : ''}</span>;
}

/** Who the API sees: the principal and its role, or that tokens are not checked. */
function Principal() {
  const me = useWhoAmI().data;
  if (!me) return null;
  return me.authenticated ? (
    <span className="principal" aria-label="Signed in as" title={`Signed in as ${me.name}, role ${me.role}`}>
      {me.name} <span className="role">{me.role}</span>
    </span>
  ) : (
    <span className="principal" aria-label="Signed in as" title="The server checks no tokens (no AUTH_FILE): every action is allowed.">
      anonymous <span className="role">auth off</span>
    </span>
  );
}

export function App() {
  const auth = useAuth();
  const qc = useQueryClient();
  // The issuer's way back is handled whatever the prompt says: this page's first calls go
  // out without a token and their 401s open the prompt while the code is being exchanged.
  const callback = useLocation().pathname === CALLBACK_PATH;
  // Refetch what failed with 401, now with the token.
  const signedIn = useCallback(() => qc.invalidateQueries(), [qc]);
  return (
    <div className="app">
      <header className="topbar">
        <span className="brand">converge</span>
        <nav aria-label="Main">
          <NavLink to="/resources/summary" className={({ isActive }) => (isActive ? 'active' : '')}>
            Resources
          </NavLink>
          <NavLink to="/resources/graph">Graph</NavLink>
          <NavLink to="/activity">Activity</NavLink>
          <NavLink to="/kinds">Kinds</NavLink>
          <NavLink to="/providerconfigs">Provider configs</NavLink>
          <NavLink to="/reactor-bindings">Reactor bindings</NavLink>
          <NavLink to="/cluster">Cluster</NavLink>
          <NavLink to="/tokens">Tokens</NavLink>
        </nav>
        <ApiStatus />
        {!auth.prompt && !callback && <Principal />}
        {auth.signedIn && (
          <button
            type="button"
            className="sign-out"
            onClick={() => {
              signOut();
              // Nothing read with the token stays on screen or in the cache.
              qc.removeQueries();
            }}
          >
            Sign out
          </button>
        )}
      </header>
      <main>
        {callback ? (
          <OidcCallback onSignedIn={signedIn} />
        ) : auth.prompt ? (
          <SignIn onSignedIn={signedIn} />
        ) : (
        <Routes>
          <Route path="/" element={<Navigate to="/resources/summary" replace />} />
          <Route path="/resources" element={<Navigate to="/resources/summary" replace />} />
          <Route path="/resources/:view" element={<ResourcesPage />} />
          <Route path="/resources/:view/r/:kind/:name" element={<ResourcesPage />} />
          <Route path="/kinds" element={<KindsPage />} />
          <Route path="/providerconfigs" element={<ProviderConfigsPage />} />
          <Route path="/reactor-bindings" element={<ReactorBindingsPage />} />
          <Route path="/activity" element={<ActivityPage />} />
          <Route path="/cluster" element={<ClusterPage />} />
          <Route path="/tokens" element={<TokensPage />} />
          <Route path="*" element={<p className="error">No page here. <NavLink to="/resources/summary">Go to resources</NavLink></p>} />
        </Routes>
        )}
      </main>
    </div>
  );
}
