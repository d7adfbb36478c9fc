import { NavLink, useLocation, useNavigate, useParams } from 'react-router-dom';
import { useQuery } from '@tanstack/react-query';
import { api } from '../../api/client';
import { FilterBar } from '../../components/FilterBar';
import { LiveBadge } from '../../components/LiveBadge';
import { EventLogContext, useEventLog } from '../../lib/liveResources';
import { useResourceFilter } from '../../lib/useResourceFilter';
import { GraphView } from '../graph/GraphView';
import { ListView } from './ListView';
import { ResourcePanel } from './ResourcePanel';
import { SummaryView } from './SummaryView';

const VIEWS = [
  { id: 'summary', label: 'Summary' },
  { id: 'list', label: 'List' },
  { id: 'graph', label: 'Graph' },
] as const;

/**
 * `/resources/:view[/r/:kind/:name]`: the summary, list or graph, plus a detail panel. The
 * views refetch when the event log moves (polling only while its stream is down).
 */
export function ResourcesPage() {
  const { view = 'summary', kind, name } = useParams();
  const { search } = useLocation();
  const navigate = useNavigate();
  const [filter, setFilter] = useResourceFilter();
  const kinds = useQuery({ queryKey: ['kinds'], queryFn: api.kinds, staleTime: 30_000 });
  const kindNames = [...new Set((kinds.data?.kinds ?? []).map((k) => k.kind))];
  const open = (k: string, n: string) => navigate(`/resources/${view}/r/${encodeURIComponent(k)}/${encodeURIComponent(n)}${search}`);
  const close = () => navigate(`/resources/${view}${search}`);
  const log = useEventLog();

  return (
    <EventLogContext.Provider value={log}>
    <div className={`resources${kind && name ? ' with-panel' : ''}`}>
      <div className="resources-main">
        <nav className="tabs" aria-label="Resource views">
          {VIEWS.map((v) => (
            <NavLink key={v.id} to={`/resources/${v.id}${search}`} className={({ isActive }) => (isActive || view === v.id ? 'tab active' : 'tab')}>
              {v.label}
            </NavLink>
          ))}
          <LiveBadge live={log.live} />
        </nav>
        {view === 'list' && <FilterBar value={filter} onChange={setFilter} kinds={kindNames} />}
        {view === 'summary' && <SummaryView filter={filter} setFilter={setFilter} />}
        {view === 'list' && <ListView filter={filter} onOpen={open} selected={kind && name ? `${kind}/${name}` : undefined} />}
        {view === 'graph' && <GraphView filter={filter} setFilter={setFilter} onOpen={open} />}
        {!VIEWS.some((v) => v.id === view) && <p className="error">Unknown view {view}.</p>}
      </div>
      {kind && name && <ResourcePanel kind={kind} name={name} onClose={close} onOpen={open} />}
    </div>
    </EventLogContext.Provider>
  );
}

