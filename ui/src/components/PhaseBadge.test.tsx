import { render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { PhaseBadge, failureOf } from './PhaseBadge';

describe('PhaseBadge', () => {
  it('shows a transient failure as Retrying, a terminal one as Failed', () => {
    const row = { phase: 'Failed', failure_terminal: false, failure_attempts: 2, failure_message: 'cloud API 503' };
    render(<PhaseBadge phase={row.phase} {...failureOf(row)} />);
    const badge = screen.getByText('Retrying');
    expect(badge.getAttribute('data-phase')).toBe('Failed');
    expect(badge.getAttribute('title')).toBe('retrying after 2 failed attempts: cloud API 503');

    const terminal = { ...row, failure_terminal: true };
    render(<PhaseBadge phase={terminal.phase} {...failureOf(terminal)} />);
    expect(screen.getByText('Failed').getAttribute('title')).toBe('terminal: cloud API 503');
  });

  it('leaves every other phase as it is', () => {
    render(<PhaseBadge phase="Ready" {...failureOf({ phase: 'Ready', failure_terminal: false, failure_attempts: 0 })} />);
    expect(screen.getByText('Ready').getAttribute('data-retrying')).toBeNull();
  });
});
