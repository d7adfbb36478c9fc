// Wire types of the converge HTTP API (`/api/v1`). The shapes come from the OpenAPI document
// the server generates from its handlers (schema.gen.ts, written by scripts/gen-api-types.sh;
// scripts/test.sh fails when it is stale); this file names them for the UI and adds the few
// types that are the client's own (a page with its cursor, a problem the client makes up).

import type * as S from './schema.gen';

/** Every phase, in the order the UI lists them. */
export const PHASES = [
  'Reconciling',
  'Ready',
  'Degraded',
  'Failed',
  'Orphaned',
  'Quarantined',
  'Deleting',
] as const satisfies readonly S.Phase[];
export type Phase = S.Phase;

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Labels = Record<string, string>;

export type ResourceRef = S.ResourceRef;
export type OwnerKey = S.ResourceKey;

/** One row of `GET /resources`, `/roots` and `/children`. */
export type ResourceItem = S.ResourceItem;
export type RootItem = S.RootItem;
export type ResourceList = S.ResourceList;
/** The order of a list walk (`sort`): `created` (oldest first) or `problems` first. */
export type ListSort = S.ListOrder;

export interface Page<T> {
  body: T;
  /** `X-Next-Cursor`; empty on the last page. */
  nextCursor: string;
}

export type Condition = S.Condition;
/** The live claim on a resource (`work`), if any. */
export type LiveWork = S.LiveWork;
export type ResourceEvent = S.ResourceEvent;
export type ResourceDetail = S.ResourceDetail;
export type PhaseCounts = S.PhaseCounts;
export type Summary = S.Summary;
export type ValueMapping = S.ValueMapping;
export type GraphNode = S.GraphNode;
export type GraphEdge = S.GraphEdge;
export type Graph = S.Graph;
export type Dependencies = S.Dependencies;
export type Operation = S.Operation;
export type SpecVersion = S.SpecVersion;
export type SpecHistory = S.SpecHistory;
export type RolledBack = S.RolledBack;
/** `GET /events/recent`: the newest events, newest first, and the log's horizon. */
export type RecentEvents = S.RecentEvents;
/** `GET /auth/config`: how people sign in (the OIDC issuer for the UI, or null). */
export type AuthConfig = S.AuthConfig;
/** The OIDC issuer, public client id, scopes and endpoints the UI signs in with. */
export type OidcConfig = S.OidcConfig;
/** `GET /whoami`: the calling principal, its role, whether tokens are checked at all. */
export type WhoAmI = S.WhoAmI;
export type Reaction = S.Reaction;
/** The operational config as the server reports it. */
export type KindConfig = S.KindConfig;
/** The body of `PUT /kinds/{kind}/versions/{v}/config` (full replace). */
export type KindConfigEdit = S.KindConfigEdit;
export type KindSummary = S.KindSummary;
export type KindManifest = S.KindManifestOut;
export type ManifestApplied = S.ManifestApplied;
/** The body of `POST /resources` (and of each document `POST /resources:plan` takes). */
export type ApplyBody = S.ApplyBody;
/** `POST /resources`'s answer. */
export type Applied = S.Applied;
/** `POST /resources:plan`'s answer: what an apply would do, nothing written. */
export type PlanResult = S.PlanResult;
export type PlanItem = S.PlanItem;
export type DiffEntry = S.DiffEntry;
export type ProviderConfig = S.ProviderConfig;
export type ProviderConfigPut = S.PutBody;
export type ReactorBinding = S.ReactorBinding;
export type ReactorBindingPut = S.BindingBody;
/** A token minted through the API, as listed (never its secret or hash). */
export type ApiToken = S.ApiToken;
/** `POST /tokens`'s answer: the only time the secret is shown. */
export type MintedApiToken = S.MintedApiToken;
/** The body of `POST /tokens`. */
export type TokenBody = S.TokenBody;
/** `GET /cluster`: the converge processes, each broker's workers, who serves each kind. */
export type Cluster = S.Cluster;
export type ClusterMember = S.ClusterMember;
export type ClusterWorker = S.ClusterWorker;
export type KindCoverage = S.KindCoverage;

export const TRANSITIONS = ['created', 'synced', 'degraded', 'failed', 'deleted'] as const;

/**
 * An RFC 7807 problem as the client holds it: the server's `Problem`, or one the client makes
 * up (unreachable server, a body that is not JSON), which has only a status and a detail.
 */
export type Problem = Pick<S.Problem, 'status' | 'detail'> & Partial<Omit<S.Problem, 'status' | 'detail'>>;
