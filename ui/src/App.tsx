import { API_BASE } from './api/client';
import { NavLink, Navigate, Route, Routes } from 'react-router-dom';
import { useQuery } from '@tanstack/react-query';
import { ProviderConfigsPage } from './pages/admin/ProviderConfigsPage';
import { ReactorBindingsPage } from './pages/admin/ReactorBindingsPage';
import { KindsPage } from './pages/kinds/KindsPage';
import { ResourcesPage } from './pages/resources/ResourcesPage';

function ApiStatus() {
  const q = useQuery({ queryKey: ['version'], queryFn: () => fetch(`${API_BASE}/version`).then((r) => (r.ok ? r.json() : Promise.reject(new Error(r.statusText)))), refetchInterval: 10_000, retry: false });
  if (q.error) return <span className="api-status down">API unreachable</span>;
  const v = (q.data as { version?: string } | undefined)?.version;
  return <span className="api-status">{v ? `converge ${v}` : ''}</span>;
}

export function App() {
  return (
    <div className="app">
      <header className="topbar">
        <span className="brand">converge</span>
        <nav aria-label="Main">
          <NavLink to="/resources/summary" className={({ isActive }) => (isActive ? 'active' : '')}>
            Resources
          </NavLink>
          <NavLink to="/resources/graph">Graph</NavLink>
          <NavLink to="/kinds">Kinds</NavLink>
          <NavLink to="/providerconfigs">Provider configs</NavLink>
          <NavLink to="/reactor-bindings">Reactor bindings</NavLink>
        </nav>
        <ApiStatus />
      </header>
      <main>
        <Routes>
          <Route path="/" element={<Navigate to="/resources/summary" replace />} />
          <Route path="/resources" element={<Navigate to="/resources/summary" replace />} />
          <Route path="/resources/:view" element={<ResourcesPage />} />
          <Route path="/resources/:view/r/:kind/:name" element={<ResourcesPage />} />
          <Route path="/kinds" element={<KindsPage />} />
          <Route path="/providerconfigs" element={<ProviderConfigsPage />} />
          <Route path="/reactor-bindings" element={<ReactorBindingsPage />} />
          <Route path="*" element={<p className="error">No page here. <NavLink to="/resources/summary">Go to resources</NavLink></p>} />
        </Routes>
      </main>
    </div>
  );
}
