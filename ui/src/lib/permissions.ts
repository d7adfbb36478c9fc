// Who the UI is signed in as, and what that principal's role may do. The server decides
// (SECURITY.md's role table; a refused call answers 403), the UI only disables ahead of it
// what it knows the role cannot do, with a tooltip saying why. Until `GET /whoami` answers
// (or when a server without it answers an error) nothing is disabled: the server still checks.

import { useQuery } from '@tanstack/react-query';
import { api } from '../api/client';
import type { WhoAmI } from '../api/types';

/** The roles of the HTTP API, weakest first. */
export type ApiRole = 'viewer' | 'operator' | 'admin';

const RANK: Record<string, number> = { viewer: 1, operator: 2, admin: 3 };

/** Whether `role` may make a call that needs `need` (a worker role may make none). */
export function roleAllows(role: string, need: ApiRole): boolean {
  const have = RANK[role];
  return have !== undefined && have >= RANK[need];
}

export interface Permission {
  allowed: boolean;
  /** Why not, for the disabled control's tooltip. */
  why?: string;
}

/** What `me` may do of a call that needs `need` (unknown caller: allowed, the server decides). */
export function permission(me: WhoAmI | undefined, need: ApiRole): Permission {
  if (!me || roleAllows(me.role, need)) return { allowed: true };
  return { allowed: false, why: `Needs role ${need}; ${me.name} has role ${me.role}.` };
}

/** The calling principal (`['whoami']`, dropped with every query on sign-out). */
export function useWhoAmI() {
  return useQuery({ queryKey: ['whoami'], queryFn: api.whoami, staleTime: 60_000, retry: false });
}

/** What the signed-in principal may do of a call that needs `need`. */
export function usePermission(need: ApiRole): Permission {
  return permission(useWhoAmI().data, need);
}
