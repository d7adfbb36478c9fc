import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, POLL_MS } from '../../api/client';
import type { Cluster, ClusterMember, ClusterWorker, KindCoverage } from '../../api/types';
import { QueryState } from '../../components/QueryState';
import { SimpleTable } from '../../components/SimpleTable';
import { age, when } from '../../lib/time';

/** `/cluster`: who is here — the converge processes, the workers on each broker, and per kind
 * version how many workers serve it (a kind nobody serves cannot progress). Polled. */
export function ClusterPage() {
  const q = useQuery({ queryKey: ['cluster'], queryFn: api.cluster, refetchInterval: POLL_MS, placeholderData: keepPreviousData });
  return (
    <div className="cluster-page">
      <div className="page-head">
        <h2>Cluster</h2>
      </div>
      <QueryState what="the cluster" data={q.data} error={q.error} isLoading={q.isLoading}>
        {(c) => <ClusterBody c={c} />}
      </QueryState>
    </div>
  );
}

function ClusterBody({ c }: { c: Cluster }) {
  const workers = c.members.flatMap((m) => m.workers.map((w) => ({ broker: m, w })));
  return (
    <>
      <h3>Members</h3>
      <Members members={c.members} />
      <h3>Workers</h3>
      <Workers rows={workers} />
      <h3>Kind coverage</h3>
      <Coverage kinds={c.kinds} />
    </>
  );
}

function Members({ members }: { members: ClusterMember[] }) {
  const columns = [
    { head: 'Role' },
    { head: 'Member' },
    { head: 'Status' },
    { head: 'Version' },
    { head: 'Shards' },
    { head: 'Claims', hideNarrow: true },
    { head: 'Workers' },
    { head: 'Addresses', hideNarrow: true },
    { head: 'Started', hideNarrow: true },
    { head: 'Heartbeat' },
  ];
  const rows = members.map((m) => (
    // A NotReady member (silent past MEMBER_DEAD_AFTER) stays listed, greyed, until its row is removed.
    <tr key={m.id} data-member={m.id} className={m.status === 'Ready' ? undefined : 'not-ready'}>
      <td>{m.role}</td>
      <td title={`${m.host} pid ${m.pid}`}>{m.id}</td>
      <td>{m.status === 'Ready' ? 'Ready' : <span className="warn">NotReady</span>}</td>
      <td>{m.version}</td>
      <td title="Its share of the 256 shards (dynamic sharding)">{m.shards ? `${m.shards.lo}–${m.shards.hi}` : '—'}</td>
      <td className="hide-narrow">
        {m.claims.length === 0
          ? '—'
          : m.claims.map((c) => (
              <span key={`${c.kind}@${c.kind_version}`} className="label" title="Shards it claims this kind version's tasks in">
                {c.kind} v{c.kind_version} {c.lo}–{c.hi}
              </span>
            ))}
      </td>
      <td>{m.role === 'control' ? '—' : m.workers.length}</td>
      <td className="hide-narrow">
        {Object.entries(m.addresses).map(([k, v]) => (
          <span key={k} className="label">
            {k} {v}
          </span>
        ))}
      </td>
      <td className="hide-narrow" title={when(m.started_at)}>
        {age(m.started_at)} ago
      </td>
      <td>{age(m.heartbeat_at)} ago</td>
    </tr>
  ));
  return <SimpleTable label="Members" columns={columns} rows={rows} empty="No converge process has stamped its row lately." />;
}

function Workers({ rows }: { rows: { broker: ClusterMember; w: ClusterWorker }[] }) {
  const columns = [
    { head: 'Worker' },
    { head: 'Broker' },
    { head: 'Kinds' },
    { head: 'In flight' },
    { head: 'SDK', hideNarrow: true },
    { head: 'Connected', hideNarrow: true },
  ];
  const body = rows.map(({ broker, w }) => (
    <tr key={`${broker.id}/${w.stream}`} data-worker={w.name}>
      <td>
        {w.name || <span className="muted">unnamed</span>}
        {w.draining && <span className="warn"> draining</span>}
      </td>
      <td>{broker.id}</td>
      <td>
        <div className="reactions">
          {w.kinds.map((k) => {
            const unknown = w.unknown_kinds.some((u) => u.kind === k.kind && u.kind_version === k.kind_version);
            const note = unknown ? ' — not registered' : k.ready ? '' : ' — not ready';
            return (
              <span key={`${k.kind}@${k.kind_version}`} className={unknown || !k.ready ? 'label warn' : 'label'}>
                {k.kind} v{k.kind_version}
                {note}
              </span>
            );
          })}
        </div>
      </td>
      <td>
        {w.inflight} / {w.max_inflight}
      </td>
      <td className="hide-narrow">{w.sdk || '—'}</td>
      <td className="hide-narrow" title={when(w.connected_at)}>
        {age(w.connected_at)} ago
      </td>
    </tr>
  ));
  return <SimpleTable label="Workers" columns={columns} rows={body} empty="No worker is connected to any broker." />;
}

/** Why a kind version cannot progress, if it cannot. */
function coverageNote(k: KindCoverage): string {
  if (!k.registered) return 'not registered: workers subscribe for it, no manifest declares it';
  if (k.workers === 0) return 'no worker serves it: its resources wait';
  if (k.ready_workers === 0) return 'no worker is ready for it';
  return '';
}

function Coverage({ kinds }: { kinds: KindCoverage[] }) {
  const columns = [{ head: 'Kind' }, { head: 'Version' }, { head: 'Workers' }, { head: 'Ready' }, { head: 'Note' }];
  const rows = kinds.map((k) => (
    <tr key={`${k.kind}@${k.kind_version}`} data-kind={`${k.kind}@${k.kind_version}`}>
      <td>{k.kind}</td>
      <td>{k.kind_version}</td>
      <td>{k.workers}</td>
      <td>{k.ready_workers}</td>
      <td>{coverageNote(k) && <span className="warn">{coverageNote(k)}</span>}</td>
    </tr>
  ));
  return <SimpleTable label="Kind coverage" columns={columns} rows={rows} empty="No kinds yet." />;
}
