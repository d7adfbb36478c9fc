import type { ReactNode } from 'react';

/** A column head; `hideNarrow` hides the column below 900 px. */
export interface Column {
  head: string;
  hideNarrow?: boolean;
}

interface Props {
  label: string;
  columns: Column[];
  /** The body rows (`<tr>`s); `empty` is shown in one row when there are none. */
  rows: ReactNode[];
  empty: string;
}

/** A labelled table in the page's card style: head, rows, and a line when there are none. */
export function SimpleTable({ label, columns, rows, empty }: Props) {
  return (
    <div className="table-wrap">
      <table className="table" aria-label={label}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.head} className={c.hideNarrow ? 'hide-narrow' : undefined}>
                {c.head}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows}
          {rows.length === 0 && (
            <tr>
              <td colSpan={columns.length} className="empty">
                {empty}
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
