// Turns an API graph into positioned nodes and edges: dependency edges (dependent → upstream,
// labelled with the values that flow), ownership edges from the root to its top-level
// children, and the paths from the root down to every Failed node marked.

import dagre from '@dagrejs/dagre';
import type { Graph, GraphNode } from '../../api/types';

export const NODE_W = 190;
export const NODE_H = 60;

export interface LaidNode {
  node: GraphNode;
  x: number;
  y: number;
  onFailedPath: boolean;
}

export interface LaidEdge {
  id: string;
  source: string;
  target: string;
  label: string;
  owns: boolean;
  onFailedPath: boolean;
}

export function layoutGraph(g: Graph): { nodes: LaidNode[]; edges: LaidEdge[] } {
  const root = g.nodes[0]?.ref;
  const present = new Set(g.nodes.map((n) => n.ref));
  const deps = g.edges.filter((e) => present.has(e.from) && present.has(e.to));
  const hasDependents = new Set(deps.map((e) => e.to));
  const edges: LaidEdge[] = deps.map((e) => ({
    id: `${e.from}->${e.to}`,
    source: e.from,
    target: e.to,
    label: e.value_mappings.map((m) => (m.source_field === m.dependent_field ? m.source_field.replace(/^\//, '') : `${m.source_field}→${m.dependent_field}`)).join(', '),
    owns: false,
    onFailedPath: false,
  }));
  if (root) {
    for (const n of g.nodes) {
      if (n.depth === 1 && !hasDependents.has(n.ref)) {
        edges.push({ id: `${root}=>${n.ref}`, source: root, target: n.ref, label: '', owns: true, onFailedPath: false });
      }
    }
  }

  // A node is on a failed path when it is Failed or one of its out-edges leads to one.
  const out = new Map<string, string[]>();
  for (const e of edges) out.set(e.source, [...(out.get(e.source) ?? []), e.target]);
  const phase = new Map(g.nodes.map((n) => [n.ref, n.phase]));
  const memo = new Map<string, boolean>();
  const reaches = (ref: string, seen: Set<string>): boolean => {
    const known = memo.get(ref);
    if (known !== undefined) return known;
    if (seen.has(ref)) return false;
    seen.add(ref);
    const r = phase.get(ref) === 'Failed' || (out.get(ref) ?? []).some((t) => reaches(t, seen));
    memo.set(ref, r);
    return r;
  };
  for (const n of g.nodes) reaches(n.ref, new Set());
  for (const e of edges) e.onFailedPath = !!memo.get(e.source) && !!memo.get(e.target);

  const dg = new dagre.graphlib.Graph();
  dg.setGraph({ rankdir: 'LR', nodesep: 14, ranksep: 70 });
  dg.setDefaultEdgeLabel(() => ({}));
  for (const n of g.nodes) dg.setNode(n.ref, { width: NODE_W, height: NODE_H });
  for (const e of edges) dg.setEdge(e.source, e.target);
  dagre.layout(dg);
  const nodes = g.nodes.map((n) => {
    const p = dg.node(n.ref);
    return { node: n, x: p.x - NODE_W / 2, y: p.y - NODE_H / 2, onFailedPath: !!memo.get(n.ref) };
  });
  return { nodes, edges };
}
