import { useEffect, useState } from 'react';
import type { Phase } from '../api/types';
import { EMPTY_FILTER, isLabelSelector, isRef, type ResourceFilter } from '../lib/filters';
import { PhaseChips } from './PhaseChips';
import { TokenInput } from './TokenInput';

interface Props {
  value: ResourceFilter;
  onChange: (f: ResourceFilter) => void;
  kinds?: string[];
  showPhases?: boolean;
}

/** Phase, kind, name, label and owner filters of the resource list (state lives in the URL). */
export function FilterBar({ value, onChange, kinds, showPhases = true }: Props) {
  const [name, setName] = useState(value.name);
  useEffect(() => setName(value.name), [value.name]);
  const commitName = () => {
    if (name.trim() !== value.name) onChange({ ...value, name: name.trim() });
  };
  const empty =
    !value.name && !value.phases.length && !value.kinds.length && !value.labels.length && !value.owners.length;
  return (
    <form
      className="filter-bar"
      aria-label="Filters"
      onSubmit={(e) => {
        e.preventDefault();
        commitName();
      }}
    >
      {showPhases && <PhaseChips selected={value.phases} onChange={(phases: Phase[]) => onChange({ ...value, phases })} />}
      <div className="filter-fields">
        <TokenInput label="Kind" values={value.kinds} onChange={(kinds) => onChange({ ...value, kinds })} placeholder="e.g. route" suggestions={kinds} />
        <div className="token-input">
          <label htmlFor="filter-name">Name contains</label>
          <input id="filter-name" value={name} onChange={(e) => setName(e.target.value)} onBlur={commitName}
            onKeyDown={(e) => {
              if (e.key === 'Enter') {
                e.preventDefault();
                commitName();
              }
            }}
            placeholder="substring"
          />
        </div>
        <TokenInput
          label="Label"
          values={value.labels}
          onChange={(labels) => onChange({ ...value, labels })}
          placeholder="key:value"
          validate={(v) => (isLabelSelector(v) ? null : 'a label filter is key:value')}
        />
        <TokenInput
          label="Owner"
          values={value.owners}
          onChange={(owners) => onChange({ ...value, owners })}
          placeholder="kind/name"
          validate={(v) => (isRef(v) ? null : 'an owner is kind/name')}
        />
        {!empty && (
          <button type="button" className="link" onClick={() => onChange(EMPTY_FILTER)}>
            clear filters
          </button>
        )}
      </div>
    </form>
  );
}
