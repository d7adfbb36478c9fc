import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { useState } from 'react';
import { describe, expect, it, vi } from 'vitest';
import { PHASES, type Phase } from '../api/types';
import { PhaseChips } from './PhaseChips';

function Harness({ onChange }: { onChange: (p: Phase[]) => void }) {
  const [sel, setSel] = useState<Phase[]>([]);
  return (
    <PhaseChips
      selected={sel}
      onChange={(p) => {
        setSel(p);
        onChange(p);
      }}
    />
  );
}

describe('PhaseChips', () => {
  it('shows one chip per phase, none pressed initially', () => {
    render(<PhaseChips selected={[]} onChange={() => {}} />);
    for (const p of PHASES) expect(screen.getByRole('button', { name: p })).toHaveAttribute('aria-pressed', 'false');
    expect(screen.queryByRole('button', { name: 'all phases' })).toBeNull();
  });

  it('selects several phases as a union, in canonical order, and toggles them off', async () => {
    const onChange = vi.fn();
    render(<Harness onChange={onChange} />);
    await userEvent.click(screen.getByRole('button', { name: 'Failed' }));
    await userEvent.click(screen.getByRole('button', { name: 'Ready' }));
    expect(onChange).toHaveBeenLastCalledWith(['Ready', 'Failed']);
    expect(screen.getByRole('button', { name: 'Ready' })).toHaveAttribute('aria-pressed', 'true');
    expect(screen.getByRole('button', { name: 'Failed' })).toHaveAttribute('aria-pressed', 'true');
    await userEvent.click(screen.getByRole('button', { name: 'Ready' }));
    expect(onChange).toHaveBeenLastCalledWith(['Failed']);
  });

  it('clears every phase with "all phases"', async () => {
    const onChange = vi.fn();
    render(<PhaseChips selected={['Degraded', 'Failed']} onChange={onChange} />);
    await userEvent.click(screen.getByRole('button', { name: 'all phases' }));
    expect(onChange).toHaveBeenCalledWith([]);
  });

  it('shows counts when given', () => {
    render(<PhaseChips selected={[]} onChange={() => {}} counts={{ Ready: 23, Failed: 1 }} />);
    expect(screen.getByRole('button', { name: 'Ready 23' })).toBeInTheDocument();
  });
});
