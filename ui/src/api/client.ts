// The one typed client of converge's HTTP API. Every call goes to `/api/v1/...` on the
// page's own origin with the tab's token (if any) as `Authorization: Bearer`; errors become
// `ApiError` carrying the RFC 7807 problem, and a 401 also opens the sign-in prompt.

import { getToken, unauthorized } from './auth';
import { filterQuery, type ResourceFilter } from '../lib/filters';
import type {
  Applied,
  ApplyBody,
  ApiToken,
  AuthConfig,
  Cluster,
  Dependencies,
  Graph,
  Json,
  KindConfig,
  KindConfigEdit,
  KindManifest,
  KindSummary,
  ListSort,
  ManifestApplied,
  MintedApiToken,
  PlanResult,
  Operation,
  Page,
  Problem,
  ProviderConfig,
  ProviderConfigPut,
  ReactorBinding,
  ReactorBindingPut,
  RecentEvents,
  ResourceDetail,
  ResourceList,
  RolledBack,
  RootItem,
  SpecHistory,
  Summary,
  TokenBody,
  WhoAmI,
} from './types';

export const API_BASE = '/api/v1';

export class ApiError extends Error {
  constructor(public readonly problem: Problem) {
    super(problem.detail || `HTTP ${problem.status}`);
    this.name = 'ApiError';
  }
  get status() {
    return this.problem.status;
  }
  /** The messages the server gave for one location (e.g. `/name`). */
  at(location: string): string[] {
    return (this.problem.errors ?? []).filter((e) => e.location === location).map((e) => e.message);
  }
}

const enc = encodeURIComponent;
const res = (kind: string, name: string) => `/resources/${enc(kind)}/${enc(name)}`;

async function request(method: string, path: string, body?: unknown): Promise<Response> {
  const token = getToken();
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token) headers['authorization'] = `Bearer ${token}`;
  let resp: Response;
  try {
    resp = await fetch(API_BASE + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError({ status: 0, detail: `cannot reach the converge API: ${(e as Error).message}` });
  }
  if (resp.status === 401) unauthorized(token);
  if (!resp.ok) {
    let problem: Problem = { status: resp.status, detail: `${resp.status} ${resp.statusText}` };
    try {
      const p = (await resp.json()) as Partial<Problem>;
      problem = { ...problem, ...p, status: resp.status, detail: p.detail ?? problem.detail };
    } catch {
      /* not a problem+json body */
    }
    throw new ApiError(problem);
  }
  return resp;
}

async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await request(method, path, body);
  if (r.status === 204) return undefined as T;
  return (await r.json()) as T;
}

async function page<T>(path: string): Promise<Page<T>> {
  const r = await request('GET', path);
  return { body: (await r.json()) as T, nextCursor: r.headers.get('x-next-cursor') ?? '' };
}

export const api = {
  version: () => json<{ version?: string }>('GET', '/version'),
  /** The calling principal and its role (`anonymous`/`admin` when authentication is off). */
  whoami: () => json<WhoAmI>('GET', '/whoami'),
  /** How people sign in: the OIDC issuer for the UI, or `oidc: null` (answers without a token). */
  authConfig: () => json<AuthConfig>('GET', '/auth/config'),

  // Resources
  /** One page of resources; `sort` is the server's order (`problems`: Failed, Quarantined,
   * Degraded, Orphaned first). Every page of one walk must use the same order. */
  listResources: (f: ResourceFilter, limit: number, cursor: string, sort: ListSort = 'created') =>
    page<ResourceList>(`/resources?${filterQuery(f, { limit: String(limit), cursor, sort: sort === 'created' ? undefined : sort })}`),
  listRoots: (f: Partial<ResourceFilter> = {}, limit = 50, cursor = '') =>
    page<{ roots: RootItem[] }>(
      `/resources/roots?${filterQuery({ phases: [], kinds: [], owners: [], labels: [], name: '', ...f }, { limit: String(limit), cursor })}`,
    ),
  summary: (owners: string[]) =>
    json<Summary>('GET', `/resources/summary${owners.length ? '?' + owners.map((o) => `owner=${enc(o)}`).join('&') : ''}`),
  resource: (kind: string, name: string) => json<ResourceDetail>('GET', res(kind, name)),
  dependencies: (kind: string, name: string) => json<Dependencies>('GET', `${res(kind, name)}/dependencies`),
  graph: (kind: string, name: string, limit: number) => json<Graph>('GET', `${res(kind, name)}/graph?limit=${limit}`),
  reconcile: (kind: string, name: string) => json<{ status: string }>('POST', `${res(kind, name)}/reconcile`),
  quarantine: (kind: string, name: string) => json<{ quarantined: boolean }>('POST', `${res(kind, name)}/quarantine`),
  unquarantine: (kind: string, name: string) => json<{ quarantined: boolean }>('POST', `${res(kind, name)}/unquarantine`),
  deleteResource: (kind: string, name: string) => json<{ phase: string; marked: number }>('DELETE', res(kind, name)),
  specHistory: (kind: string, name: string) => json<SpecHistory>('GET', `${res(kind, name)}/spec-history`),
  /** What applying `doc` would do (its diff; a composite's children and edges), nothing written. */
  plan: (doc: ApplyBody) => json<PlanResult>('POST', '/resources:plan', doc),
  applyResource: (doc: ApplyBody) => json<Applied>('POST', '/resources', doc),
  rollback: (kind: string, name: string, generation: number) => json<RolledBack>('POST', `${res(kind, name)}/rollback`, { generation }),
  /** Every resource's newest events, newest first (older than `before`, an event id), and
   * the log's horizon to follow on from with `/events?watch=true&cursor=`. */
  recentEvents: (limit: number, before?: number) =>
    json<RecentEvents>('GET', `/events/recent?limit=${limit}${before === undefined ? '' : `&before=${before}`}`),
  operations: (kind: string, name: string) => json<{ items: Operation[] }>('GET', `${res(kind, name)}/ops`),
  runOperation: (kind: string, name: string, verb: string, input?: Json) =>
    json<Operation>('POST', `${res(kind, name)}/ops`, { verb, input, requested_by: 'ui' }),

  // Kinds
  kinds: () => json<{ kinds: KindSummary[] }>('GET', '/kinds'),
  manifest: (kind: string, version: number) => json<KindManifest>('GET', `/kinds/${enc(kind)}/versions/${version}/manifest`),
  applyManifest: (manifest: Json, force = false) => {
    const kind = manifest && typeof manifest === 'object' && !Array.isArray(manifest) ? manifest['kind'] : undefined;
    if (typeof kind !== 'string' || !kind) {
      return Promise.reject(new ApiError({ status: 422, detail: 'the manifest needs a "kind"', errors: [{ location: '/kind', message: 'required' }] }));
    }
    return json<ManifestApplied>('PUT', `/kinds/${enc(kind)}/manifest${force ? '?force=true' : ''}`, manifest);
  },
  kindConfig: (kind: string, version: number) => json<KindConfig>('GET', `/kinds/${enc(kind)}/versions/${version}/config`),
  putKindConfig: (kind: string, version: number, c: KindConfigEdit) =>
    json<KindConfig>('PUT', `/kinds/${enc(kind)}/versions/${version}/config`, c),

  // Provider configs
  providerConfigs: () => json<{ items: ProviderConfig[]; total: number }>('GET', '/providerconfigs?limit=500'),
  providerConfig: (name: string) => json<ProviderConfig>('GET', `/providerconfigs/${enc(name)}`),
  putProviderConfig: (c: ProviderConfigPut) => json<ProviderConfig>('POST', '/providerconfigs', c),
  deleteProviderConfig: (name: string) => json<void>('DELETE', `/providerconfigs/${enc(name)}`),

  // Cluster
  cluster: () => json<Cluster>('GET', '/cluster'),

  // Reactor bindings
  reactorBindings: () => json<{ items: ReactorBinding[] }>('GET', '/reactor-bindings'),
  putReactorBinding: (b: ReactorBindingPut) => json<ReactorBinding>('POST', '/reactor-bindings', b),
  deleteReactorBinding: (name: string) => json<void>('DELETE', `/reactor-bindings/${enc(name)}`),

  // API tokens (admin only)
  tokens: () => json<{ items: ApiToken[] }>('GET', '/tokens'),
  mintToken: (b: TokenBody) => json<MintedApiToken>('POST', '/tokens', b),
  revokeToken: (name: string) => json<void>('DELETE', `/tokens/${enc(name)}`),
};

/** How often live views poll. */
export const POLL_MS = 2000;
