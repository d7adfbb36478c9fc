interface Props {
  count: number;
  page: number;
  canPrev: boolean;
  canNext: boolean;
  onPrev: () => void;
  onNext: () => void;
  busy?: boolean;
}

/** "N resources · page K" with Prev/Next; keyset pages have no total. */
export function Pager({ count, page, canPrev, canNext, onPrev, onNext, busy }: Props) {
  return (
    <nav className="pager" aria-label="Pagination">
      <button type="button" onClick={onPrev} disabled={!canPrev}>
        ← Prev
      </button>
      <span className="pager-status" aria-live="polite">
        {count} resource{count === 1 ? '' : 's'} · page {page}
        {busy && <span className="spinner" aria-label="refreshing" />}
      </span>
      <button type="button" onClick={onNext} disabled={!canNext}>
        Next →
      </button>
    </nav>
  );
}
