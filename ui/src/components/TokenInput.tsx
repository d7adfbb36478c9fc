import { useState } from 'react';

interface Props {
  label: string;
  values: string[];
  onChange: (values: string[]) => void;
  placeholder?: string;
  /** Returns an error message for a value that may not be added. */
  validate?: (v: string) => string | null;
  suggestions?: string[];
}

/** A text box that adds repeatable filter values shown as removable chips. */
export function TokenInput({ label, values, onChange, placeholder, validate, suggestions }: Props) {
  const [draft, setDraft] = useState('');
  const [error, setError] = useState<string | null>(null);
  const id = `token-${label.toLowerCase().replace(/\W+/g, '-')}`;
  const add = () => {
    const v = draft.trim();
    if (!v) return;
    const err = validate?.(v) ?? null;
    setError(err);
    if (err) return;
    if (!values.includes(v)) onChange([...values, v]);
    setDraft('');
  };
  return (
    <div className="token-input">
      <label htmlFor={id}>{label}</label>
      <div className="token-row">
        {values.map((v) => (
          <span key={v} className="token">
            {v}
            <button type="button" aria-label={`remove ${label} ${v}`} onClick={() => onChange(values.filter((x) => x !== v))}>
              ×
            </button>
          </span>
        ))}
        <input
          id={id}
          value={draft}
          placeholder={placeholder}
          list={suggestions ? `${id}-list` : undefined}
          onChange={(e) => {
            setDraft(e.target.value);
            setError(null);
          }}
          onKeyDown={(e) => {
            if (e.key === 'Enter') {
              e.preventDefault();
              add();
            }
          }}
          onBlur={add}
        />
        {suggestions && (
          <datalist id={`${id}-list`}>
            {suggestions.map((s) => (
              <option key={s} value={s} />
            ))}
          </datalist>
        )}
      </div>
      {error && (
        <div className="field-error" role="alert">
          {error}
        </div>
      )}
    </div>
  );
}
