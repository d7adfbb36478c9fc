// Whether a view updates as changes happen (its event stream is open) or by polling.
/** Says whether what is shown updates as it changes, or by polling. */
export function LiveBadge({ live }: { live: boolean }) {
  return live ? (
    <span className="live-badge" title="Updated as changes happen (a live event stream)">
      live
    </span>
  ) : (
    <span className="live-badge off" title="The event stream is not open: refreshed every few seconds">
      polling
    </span>
  );
}
