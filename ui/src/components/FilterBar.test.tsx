import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { useState } from 'react';
import { describe, expect, it, vi } from 'vitest';
import { EMPTY_FILTER, type ResourceFilter } from '../lib/filters';
import { FilterBar } from './FilterBar';

function Harness({ initial = EMPTY_FILTER, onChange }: { initial?: ResourceFilter; onChange: (f: ResourceFilter) => void }) {
  const [f, setF] = useState(initial);
  return (
    <FilterBar
      value={f}
      onChange={(n) => {
        setF(n);
        onChange(n);
      }}
    />
  );
}

describe('FilterBar', () => {
  it('adds kinds, labels and owners as repeatable values', async () => {
    const onChange = vi.fn();
    render(<Harness onChange={onChange} />);
    await userEvent.type(screen.getByLabelText('Kind'), 'route{Enter}');
    await userEvent.type(screen.getByLabelText('Kind'), 'vpc{Enter}');
    await userEvent.type(screen.getByLabelText('Label'), 'team:alpha{Enter}');
    await userEvent.type(screen.getByLabelText('Owner'), 'classicbom/demo-bom{Enter}');
    expect(onChange).toHaveBeenLastCalledWith({
      ...EMPTY_FILTER,
      kinds: ['route', 'vpc'],
      labels: ['team:alpha'],
      owners: ['classicbom/demo-bom'],
    });
    await userEvent.click(screen.getByRole('button', { name: 'remove Kind route' }));
    expect(onChange).toHaveBeenLastCalledWith(expect.objectContaining({ kinds: ['vpc'] }));
  });

  it('refuses malformed labels and owners with a message, without changing the filter', async () => {
    const onChange = vi.fn();
    render(<Harness onChange={onChange} />);
    await userEvent.type(screen.getByLabelText('Label'), 'nocolon{Enter}');
    expect(screen.getByRole('alert')).toHaveTextContent('key:value');
    await userEvent.clear(screen.getByLabelText('Label'));
    await userEvent.type(screen.getByLabelText('Owner'), 'justakind{Enter}');
    expect(screen.getByRole('alert')).toHaveTextContent('kind/name');
    expect(onChange).not.toHaveBeenCalled();
  });

  it('commits the name substring on Enter and combines it with phases', async () => {
    const onChange = vi.fn();
    render(<Harness onChange={onChange} />);
    await userEvent.type(screen.getByLabelText('Name contains'), 'alpha{Enter}');
    expect(onChange).toHaveBeenLastCalledWith({ ...EMPTY_FILTER, name: 'alpha' });
    await userEvent.click(screen.getByRole('button', { name: 'Failed' }));
    expect(onChange).toHaveBeenLastCalledWith({ ...EMPTY_FILTER, name: 'alpha', phases: ['Failed'] });
  });

  it('clears every filter at once', async () => {
    const onChange = vi.fn();
    render(<Harness initial={{ ...EMPTY_FILTER, kinds: ['route'], phases: ['Ready'], name: 'x' }} onChange={onChange} />);
    expect(screen.getByLabelText('Name contains')).toHaveValue('x');
    await userEvent.click(screen.getByRole('button', { name: 'clear filters' }));
    expect(onChange).toHaveBeenLastCalledWith(EMPTY_FILTER);
    expect(screen.getByLabelText('Name contains')).toHaveValue('');
  });
});
