import type { Json } from '../api/types';

export function JsonView({ value, label }: { value: Json | undefined; label?: string }) {
  return (
    <pre className="json" aria-label={label}>
      {value === undefined || value === null ? 'null' : JSON.stringify(value, null, 2)}
    </pre>
  );
}
