import type { Phase } from '../api/types';

export function PhaseBadge({ phase }: { phase: Phase | string }) {
  return (
    <span className={`phase phase-${phase}`} data-phase={phase}>
      {phase}
    </span>
  );
}
