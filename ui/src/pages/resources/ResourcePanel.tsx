import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router-dom';
import { api, POLL_MS } from '../../api/client';
import type { ResourceDetail } from '../../api/types';
import { JsonView } from '../../components/JsonView';
import { LiveBadge } from '../../components/LiveBadge';
import { PhaseBadge, failureOf } from '../../components/PhaseBadge';
import { QueryState } from '../../components/QueryState';
import { useResourceLive } from '../../lib/liveResources';
import { when } from '../../lib/time';
import { pollWhileOffline } from '../../lib/useEventStream';
import { ConditionsTable } from './ConditionsTable';
import { DependenciesSection } from './DependenciesSection';
import { EventsList } from './EventsList';
import { HistorySection } from './HistorySection';
import { LiveClaim } from './LiveClaim';
import { OperationsSection } from './OperationsSection';
import { ResourceActions } from './ResourceActions';

interface Props {
  kind: string;
  name: string;
  onClose: () => void;
  onOpen: (kind: string, name: string) => void;
}

/**
 * The detail of one resource: spec, status, conditions, events, claim, actions. It is read
 * again when one of its events arrives on the page's event-log stream, and polled only while
 * that stream is down.
 */
export function ResourcePanel({ kind, name, onClose, onOpen }: Props) {
  const live = useResourceLive(kind, name);
  const q = useQuery({
    queryKey: ['resource', kind, name],
    queryFn: () => api.resource(kind, name),
    refetchInterval: pollWhileOffline(live, POLL_MS),
    placeholderData: (prev, prevQuery) => (prevQuery?.queryKey[1] === kind && prevQuery?.queryKey[2] === name ? prev : undefined),
  });
  return (
    <aside className="panel" aria-label="Resource detail">
      <header className="panel-head">
        <h2>
          <span className="muted">{kind}/</span>
          {name}
        </h2>
        <LiveBadge live={live} />
        <button type="button" className="close" aria-label="Close detail" onClick={onClose}>
          ×
        </button>
      </header>
      <QueryState what={`${kind}/${name}`} data={q.data} error={q.error} isLoading={q.isLoading}>
        {(r) => <ResourceDetailBody r={r} onOpen={onOpen} />}
      </QueryState>
    </aside>
  );
}

function ResourceDetailBody({ r, onOpen }: { r: ResourceDetail; onOpen: Props["onOpen"] }) {
  return (
    <div className="panel-body">
      <dl className="facts">
        <dt>Phase</dt>
        <dd>
          <PhaseBadge phase={r.phase} {...failureOf(r)} />
          {r.health_ok ? '' : <span className="warn"> health not ok</span>}
        </dd>
        <dt>Generation</dt>
        <dd>
          {r.synced_gen} synced of {r.generation}
        </dd>
        <dt>Version</dt>
        <dd>{r.kind_version}</dd>
        <dt>Owner</dt>
        <dd>
          {r.owner ? (
            <button type="button" className="link" onClick={() => onOpen(r.owner!.kind, r.owner!.name)}>
              {r.owner.kind}/{r.owner.name}
            </button>
          ) : (
            'none (root)'
          )}
        </dd>
        <dt>Provider config</dt>
        <dd>
          {r.provider_config_ref ? (
            <Link to={`/providerconfigs?edit=${encodeURIComponent(r.provider_config_ref)}`}>{r.provider_config_ref}</Link>
          ) : (
            <span className="muted">the kind's default</span>
          )}
        </dd>
        <dt>Labels</dt>
        <dd className="labels">
          {Object.keys(r.labels).length === 0 && <span className="muted">none</span>}
          {Object.entries(r.labels).map(([k, v]) => (
            <span key={k} className="label">
              {k}:{v}
            </span>
          ))}
        </dd>
        {r.finalizers.length > 0 && (
          <>
            <dt>Finalizers</dt>
            <dd>{r.finalizers.join(', ')}</dd>
          </>
        )}
        {r.deletion_requested_at && (
          <>
            <dt>Deletion requested</dt>
            <dd>{when(r.deletion_requested_at)}</dd>
          </>
        )}
        <dt>Created</dt>
        <dd>{when(r.created_at)}</dd>
      </dl>
      {r.waiting_for && (
        <div className="failure" role="note" aria-label="Waiting for">
          <strong>Waiting:</strong> {r.waiting_for}. Start a worker for it, or check the worker's kinds on the{' '}
          <Link to="/cluster">Cluster</Link> page.
        </div>
      )}
      {r.failure_message && (
        <div className="failure" role="note" aria-label="Failure">
          <strong>{r.failure_terminal ? 'Terminal failure' : 'Failure'}</strong> (generation {r.failure_gen}, {r.failure_attempts} attempt
          {r.failure_attempts === 1 ? '' : 's'}): {r.failure_message}
          {r.next_attempt_at && <> Next attempt at {when(r.next_attempt_at)}.</>}
        </div>
      )}
      <ResourceActions r={r} />
      <h3>Conditions</h3>
      <ConditionsTable conditions={r.conditions} />
      <h3>Live claim</h3>
      <LiveClaim work={r.work} />
      <DependenciesSection kind={r.kind} name={r.name} onOpen={onOpen} />
      <h3>Recent events</h3>
      <EventsList events={r.recent_events} />
      <OperationsSection r={r} />
      <h3>Spec</h3>
      <JsonView value={r.spec} label="Spec" />
      <HistorySection r={r} />
      <h3>Status</h3>
      <JsonView value={r.status} label="Status" />
    </div>
  );
}

