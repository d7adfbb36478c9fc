import { PHASES, type Phase } from '../api/types';
import { togglePhase } from '../lib/filters';

interface Props {
  selected: Phase[];
  onChange: (phases: Phase[]) => void;
  /** Optional counts shown next to each phase. */
  counts?: Partial<Record<Phase, number>>;
}

/** Multi-select phase filter: the selected phases are a union the server computes. */
export function PhaseChips({ selected, onChange, counts }: Props) {
  return (
    <div className="chips" role="group" aria-label="Phase filter">
      {PHASES.map((p) => {
        const on = selected.includes(p);
        return (
          <button
            key={p}
            type="button"
            className={`chip chip-${p}${on ? ' on' : ''}`}
            aria-pressed={on}
            onClick={() => onChange(togglePhase(selected, p))}
          >
            {p}
            {counts?.[p] !== undefined && <span className="chip-count">{counts[p]}</span>}
          </button>
        );
      })}
      {selected.length > 0 && (
        <button type="button" className="link" onClick={() => onChange([])}>
          all phases
        </button>
      )}
    </div>
  );
}
