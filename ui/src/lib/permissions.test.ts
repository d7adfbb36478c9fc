import { describe, expect, it } from 'vitest';
import { permission, roleAllows } from './permissions';

describe('permissions', () => {
  it('ranks viewer < operator < admin and lets a worker do nothing', () => {
    expect(roleAllows('viewer', 'viewer')).toBe(true);
    expect(roleAllows('viewer', 'operator')).toBe(false);
    expect(roleAllows('operator', 'operator')).toBe(true);
    expect(roleAllows('operator', 'admin')).toBe(false);
    expect(roleAllows('admin', 'operator')).toBe(true);
    expect(roleAllows('worker', 'viewer')).toBe(false);
  });

  it('says why a role may not, and allows while the caller is unknown', () => {
    const viewer = { name: 'ann', role: 'viewer', kinds: [], authenticated: true };
    expect(permission(viewer, 'operator')).toEqual({ allowed: false, why: 'Needs role operator; ann has role viewer.' });
    expect(permission(viewer, 'viewer')).toEqual({ allowed: true });
    expect(permission(undefined, 'admin')).toEqual({ allowed: true });
    expect(permission({ name: 'anonymous', role: 'admin', kinds: [], authenticated: false }, 'admin').allowed).toBe(true);
  });
});
