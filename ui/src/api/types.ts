// Wire types of the converge HTTP API (`/api/v1`), as the handlers in control/src/http shape them.

export const PHASES = [
  'Reconciling',
  'Ready',
  'Degraded',
  'Failed',
  'Orphaned',
  'Quarantined',
  'Deleting',
] as const;
export type Phase = (typeof PHASES)[number];

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Labels = Record<string, string>;

export interface ResourceRef {
  kind: string;
  name: string;
}

export interface OwnerKey extends ResourceRef {
  uid: string;
}

/** One row of `GET /resources`, `/roots` and `/children`. */
export interface ResourceItem {
  uid: string;
  kind: string;
  kind_version: number;
  name: string;
  labels: Labels;
  phase: Phase;
  generation: number;
  synced_gen: number;
  is_ready: boolean;
  owner: ResourceRef | null;
  created_at: string;
  updated_at: string;
}

export interface RootItem extends ResourceItem {
  resource_count: number;
}

export interface ResourceList {
  owners: OwnerKey[];
  resources: ResourceItem[];
}

export interface Page<T> {
  body: T;
  /** `X-Next-Cursor`; empty on the last page. */
  nextCursor: string;
}

export interface Condition {
  type: string;
  status: string;
  reason: string | null;
  message: string | null;
  last_transition_at: string;
}

/** The live claim on a resource (`work`), if any. */
export interface LiveWork {
  task_type: string;
  claimed: boolean;
  attempt: number;
  generation: number;
  trigger: string;
  claimed_at: string | null;
  heartbeat_at: string | null;
  not_before: string | null;
  broker_id: string | null;
}

export interface ResourceEvent {
  id: number;
  resource_id: string;
  type: string;
  from_phase: string | null;
  to_phase: string | null;
  generation: number | null;
  message: string | null;
  at: string;
}

export interface ResourceDetail extends ResourceItem {
  spec: Json;
  status: Json;
  health_ok: boolean;
  failure_gen: number;
  failure_terminal: boolean;
  failure_attempts: number;
  failure_message: string | null;
  finalizers: string[];
  deletion_requested_at: string | null;
  provider_config_ref: string | null;
  conditions: Condition[];
  work: LiveWork | null;
  recent_events: ResourceEvent[];
}

export type PhaseCounts = Record<Phase, number>;

export interface Summary {
  owners?: OwnerKey[];
  totals: PhaseCounts;
  total: number;
  by_kind: { kind: string; total: number; phases: PhaseCounts }[];
}

export interface ValueMapping {
  dependent_field: string;
  source_field: string;
}

export interface GraphNode {
  ref: string;
  kind: string;
  name: string;
  phase: Phase;
  is_ready: boolean;
  depth: number;
}

export interface GraphEdge {
  /** The dependent, `kind/name`. */
  from: string;
  /** The upstream it waits for, `kind/name`. */
  to: string;
  value_mappings: ValueMapping[];
}

export interface Graph {
  owner: ResourceRef;
  nodes: GraphNode[];
  edges: GraphEdge[];
  total_nodes: number;
  truncated: boolean;
}

export interface Dependencies {
  dependencies: (ResourceRef & {
    upstream_phase: Phase;
    upstream_ready: boolean;
    upstream_health_ok: boolean;
    upstream_updated_at: string;
    value_mappings: ValueMapping[];
  })[];
  dependents: (ResourceRef & { phase: Phase; value_mappings: ValueMapping[] })[];
}

export interface Operation {
  uid: string;
  verb: string;
  input: Json;
  state: 'pending' | 'running' | 'succeeded' | 'failed';
  output: Json;
  error: string | null;
  attempts: number;
  requested_by: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface Reaction {
  name: string;
  trigger: string;
  emits?: string[];
  verb?: string;
  finalizer?: string;
  [k: string]: Json | undefined;
}

/** The operational config as the server reports it. */
export interface KindConfig {
  kind: string;
  kind_version: number;
  max_inflight: number;
  task_deadline_secs: number;
  resync_interval_secs: number;
  orphan_grace_secs: number;
  max_transient_attempts: number;
  resync_recomposes: boolean;
  retired: boolean;
  finalizer_name: string | null;
}

/** The body of `PUT /kinds/{kind}/versions/{v}/config` (full replace). */
export interface KindConfigEdit {
  max_inflight: number;
  task_deadline_seconds: number;
  resync_interval_seconds: number;
  orphan_grace_seconds: number;
  max_transient_attempts: number;
  resync_recomposes: boolean;
  retired: boolean;
}

export interface KindSummary {
  kind: string;
  kind_version: number;
  description: string | null;
  reactions: Reaction[] | null;
  finalizer_name: string | null;
  manifest_version: number;
  operational: KindConfig | null;
}

export interface KindManifest {
  kind: string;
  kind_version: number;
  description?: string;
  spec_schema?: Json;
  status_schema?: Json;
  config_schema?: Json;
  reactions: Reaction[];
  manifest_version?: number;
  finalizer_name?: string;
  task_deadline_secs?: number;
}

export interface ManifestApplied {
  kind: string;
  kind_version: number;
  manifest_version: number;
  result: 'created' | 'configured' | 'unchanged';
}

export interface ProviderConfig {
  name: string;
  kind: string;
  kind_version: number;
  is_default: boolean;
  spec: Json;
  data_size: number;
  owner_id: string | null;
  used_by: number;
  created_at: string;
  updated_at: string;
  /** base64 bundle; only on the single read. */
  data?: string | null;
}

export interface ProviderConfigPut {
  name: string;
  kind: string;
  kind_version: number;
  is_default: boolean;
  spec: Json;
  data?: string;
}

export const TRANSITIONS = ['created', 'synced', 'degraded', 'failed', 'deleted'] as const;

export interface ReactorBinding {
  name: string;
  watch_kind: string;
  transition: string;
  reactor: string;
  label_match: Labels;
  enabled: boolean;
  created_at: string;
  updated_at: string;
  pending: number;
}

export interface ReactorBindingPut {
  name: string;
  watch_kind: string;
  transition: string;
  reactor: string;
  label_match: Labels;
  enabled: boolean;
}

/** RFC 7807 problem body. */
export interface Problem {
  type?: string;
  title?: string;
  status: number;
  detail: string;
  errors?: { location: string; message: string }[];
}
