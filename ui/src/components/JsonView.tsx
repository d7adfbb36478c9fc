export function JsonView({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre className="json" aria-label={label}>
      {value === undefined || value === null ? 'null' : JSON.stringify(value, null, 2)}
    </pre>
  );
}
