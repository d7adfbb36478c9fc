import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Background, Controls, MarkerType, Position, ReactFlow, type Edge, type Node } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import { useMemo } from 'react';
import { useSearchParams } from 'react-router-dom';
import { api, POLL_MS } from '../../api/client';
import type { Graph } from '../../api/types';
import { QueryState } from '../../components/QueryState';
import type { ResourceFilter } from '../../lib/filters';
import { useListsLive } from '../../lib/liveResources';
import { pollWhileOffline } from '../../lib/useEventStream';
import { layoutGraph, NODE_H, NODE_W } from './graphModel';
import { RootsTopology } from './RootsTopology';

interface Props {
  filter: ResourceFilter;
  setFilter: (f: ResourceFilter) => void;
  onOpen: (kind: string, name: string) => void;
}

const LIMITS = [100, 200, 500, 1000];

/** The dependency DAG of one root (the first `owner` in the URL). */
export function GraphView({ filter, setFilter, onOpen }: Props) {
  const [params, setParams] = useSearchParams();
  const limit = Number(params.get('glimit')) || 200;
  const owner = filter.owners[0];
  if (!owner) return <RootsTopology onPick={(ref) => setFilter({ ...filter, owners: [ref] })} />;
  const [kind, name] = owner.split('/');
  return (
    <section className="graph-view" aria-label="Dependency graph">
      <div className="graph-head">
        <span>
          Graph of <strong>{owner}</strong>
        </span>
        <button type="button" className="link" onClick={() => setFilter({ ...filter, owners: [] })}>
          choose another root
        </button>
        <label>
          max nodes{' '}
          <select
            value={limit}
            onChange={(e) =>
              setParams((p) => {
                const o = new URLSearchParams(p);
                o.set('glimit', e.target.value);
                return o;
              })
            }
          >
            {LIMITS.map((l) => (
              <option key={l}>{l}</option>
            ))}
          </select>
        </label>
        <span className="legend">
          <span className="legend-path" /> path to a failed node
        </span>
      </div>
      <GraphCanvas kind={kind} name={name} limit={limit} onOpen={onOpen} />
    </section>
  );
}

function GraphCanvas({ kind, name, limit, onOpen }: { kind: string; name: string; limit: number; onOpen: Props['onOpen'] }) {
  const live = useListsLive();
  const q = useQuery({
    queryKey: ['graph', kind, name, limit],
    queryFn: () => api.graph(kind, name, limit),
    refetchInterval: pollWhileOffline(live, POLL_MS),
    placeholderData: keepPreviousData,
  });
  return (
    <QueryState what="the graph" data={q.data} error={q.error} isLoading={q.isLoading}>
      {(g) => <FlowGraph g={g} onOpen={onOpen} />}
    </QueryState>
  );
}

function FlowGraph({ g, onOpen }: { g: Graph; onOpen: Props['onOpen'] }) {
  // Re-layout only when the shape or a phase changes, so polling does not move anything.
  const shape = JSON.stringify([g.nodes.map((n) => [n.ref, n.phase]), g.edges.map((e) => [e.from, e.to])]);
  const { nodes, edges } = useMemo(() => {
    const laid = layoutGraph(g);
    const nodes: Node[] = laid.nodes.map((n) => ({
      id: n.node.ref,
      position: { x: n.x, y: n.y },
      data: { label: <NodeLabel kind={n.node.kind} name={n.node.name} phase={n.node.phase} /> },
      className: `graph-node node-${n.node.phase}${n.onFailedPath ? ' on-failed-path' : ''}${n.node.depth === 0 ? ' root' : ''}`,
      style: { width: NODE_W, height: NODE_H },
      sourcePosition: Position.Right,
      targetPosition: Position.Left,
      draggable: false,
      connectable: false,
    }));
    const edges: Edge[] = laid.edges.map((e) => ({
      id: e.id,
      source: e.source,
      target: e.target,
      label: e.label || undefined,
      className: `${e.owns ? 'edge-owns' : 'edge-dep'}${e.onFailedPath ? ' on-failed-path' : ''}`,
      animated: e.onFailedPath,
      markerEnd: { type: MarkerType.ArrowClosed },
      style: e.onFailedPath ? { stroke: '#d33', strokeWidth: 2.5 } : e.owns ? { strokeDasharray: '4 4' } : undefined,
    }));
    return { nodes, edges };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape]);
  return (
    <>
      <p className="graph-count" aria-live="polite">
        {g.truncated ? (
          <strong className="warn">
            Showing {g.nodes.length} of {g.total_nodes} nodes (and {g.edges.length} edges) — raise “max nodes” to see more.
          </strong>
        ) : (
          <>
            {g.nodes.length} nodes, {g.edges.length} dependency edges
          </>
        )}
      </p>
      <div className="graph-canvas" data-testid="graph-canvas">
        <ReactFlow
          nodes={nodes}
          edges={edges}
          fitView
          minZoom={0.05}
          nodesDraggable={false}
          nodesConnectable={false}
          onNodeClick={(_, n) => {
            const i = n.id.indexOf('/');
            onOpen(n.id.slice(0, i), n.id.slice(i + 1));
          }}
          proOptions={{ hideAttribution: true }}
        >
          <Background />
          <Controls showInteractive={false} />
        </ReactFlow>
      </div>
    </>
  );
}

function NodeLabel({ kind, name, phase }: { kind: string; name: string; phase: string }) {
  return (
    <div className="node-label" title={`${kind}/${name} (${phase})`}>
      <div className="node-name">{name}</div>
      <div className="node-kind">
        {kind} · {phase}
      </div>
    </div>
  );
}
