import type { ComponentChildren } from 'preact';
import { useLayoutEffect, useRef } from 'preact/hooks';

/** The value of the element an input event came from (every field here is controlled state). */
const valueOf = (e: Event) => (e.target as HTMLInputElement).value;

type FieldProps = {
  id: string;
  label: string;
  value: string;
  onValue: (value: string) => void;
  /** A short line under the label (`aria-describedby`). */
  hint?: string;
  required?: boolean;
  placeholder?: string;
  maxLength?: number;
} & (
  | { kind?: 'text' | 'number'; min?: number; max?: number; list?: string }
  | { kind: 'textarea'; rows?: number }
  | { kind: 'select'; options: readonly (readonly [value: string, label: string])[] }
);

/** One labelled input of a form: the label, an optional hint, and a text, number, textarea or select. */
export function Field(props: FieldProps) {
  const hint = props.hint ? `${props.id}-hint` : undefined;
  const common = {
    id: props.id,
    name: props.id,
    value: props.value,
    required: props.required,
    'aria-describedby': hint,
  };
  let control: ComponentChildren;
  if (props.kind === 'select')
    control = (
      <select {...common} onChange={(e) => props.onValue(valueOf(e))}>
        {props.options.map(([value, label]) => (
          <option key={value} value={value}>
            {label}
          </option>
        ))}
      </select>
    );
  else if (props.kind === 'textarea')
    control = (
      <textarea
        {...common}
        rows={props.rows ?? 3}
        maxLength={props.maxLength}
        placeholder={props.placeholder}
        onInput={(e) => props.onValue(valueOf(e))}
      />
    );
  else
    control = (
      <input
        {...common}
        type={props.kind ?? 'text'}
        min={props.min}
        max={props.max}
        list={props.list}
        maxLength={props.maxLength}
        placeholder={props.placeholder}
        onInput={(e) => props.onValue(valueOf(e))}
      />
    );
  return (
    <>
      <label for={props.id}>{props.label}</label>
      {hint ? (
        <span class="hint muted" id={hint}>
          {props.hint}
        </span>
      ) : null}
      {control}
    </>
  );
}

export interface PairColumn {
  /** Names the input of each row for assistive technology: "<legend> <row> <name>". */
  readonly name: string;
  readonly placeholder?: string;
  readonly type?: 'text' | 'number';
  /** A `<datalist>` id offering values (secret names, …). */
  readonly list?: string;
}

/**
 * A list of rows of a few inputs each (labels as key and value, env name and secret, …) in a fieldset:
 * add a row, remove one; an empty row is ignored by the form that reads it.
 */
export function PairsField(props: {
  legend: string;
  hint?: string;
  columns: readonly PairColumn[];
  rows: string[][];
  onRows: (rows: string[][]) => void;
}) {
  const { rows, onRows, columns } = props;
  // A row added from the keyboard gets the focus in its first input, where the typing goes next.
  const box = useRef<HTMLFieldSetElement>(null);
  const added = useRef(false);
  useLayoutEffect(() => {
    if (!added.current) return;
    added.current = false;
    box.current?.querySelector<HTMLInputElement>('.pair:last-of-type input')?.focus();
  }, [rows.length]);
  const set = (r: number, c: number, value: string) =>
    onRows(rows.map((row, i) => (i === r ? row.map((v, j) => (j === c ? value : v)) : row)));
  return (
    <fieldset class="pairs" ref={box}>
      <legend>{props.legend}</legend>
      {props.hint ? <p class="hint muted">{props.hint}</p> : null}
      {rows.map((row, r) => (
        <div class="pair" key={r}>
          {columns.map((col, c) => (
            <input
              key={c}
              type={col.type ?? 'text'}
              min={col.type === 'number' ? 1 : undefined}
              aria-label={`${props.legend} ${r + 1} ${col.name}`}
              placeholder={col.placeholder}
              list={col.list}
              value={row[c] ?? ''}
              onInput={(e) => set(r, c, valueOf(e))}
            />
          ))}
          <button
            type="button"
            aria-label={`Remove ${props.legend.toLowerCase()} ${r + 1}`}
            onClick={() => onRows(rows.filter((_, i) => i !== r))}
          >
            Remove
          </button>
        </div>
      ))}
      <button
        type="button"
        onClick={() => {
          added.current = true;
          onRows([...rows, columns.map(() => '')]);
        }}
      >
        Add {props.legend.toLowerCase().replace(/s$/, '')}
      </button>
    </fieldset>
  );
}

/** Rows whose first cell is filled, trimmed. */
export const filledRows = (rows: string[][]) =>
  rows.map((row) => row.map((v) => v.trim())).filter((row) => row[0] !== '');
