import { ColumnKind, formatCell } from '../runs';

declare const require: (id: string) => unknown;

interface Case {
  kind: ColumnKind;
  unit?: string;
  value: number | string | null;
  text: string;
}

/** The JSON's stand-ins for what JSON cannot hold: NaN and the infinities. */
function valueOf(raw: number | string | null): number | null {
  if (typeof raw === 'string') {
    return { nan: NaN, inf: Infinity, '-inf': -Infinity }[raw] ?? NaN;
  }
  return raw;
}

/** What `fn` returns, or the error it throws as text (a case that throws is listed, not the first only). */
function attempt(fn: () => string): string {
  try {
    return fn();
  } catch (err) {
    return `throws ${String(err)}`;
  }
}

// The one table of cases the Python catalog (tests/test_format_kinds.py) and
// the bokeh tables' JavaScript are held to: the sidebar must read the same.
const table = require('../../../tests/data/format_cases/kinds.json') as { cases: Case[] };

test('the shared table covers every numeric kind', () => {
  const kinds = new Set(table.cases.map(c => c.kind));
  for (const kind of ['count', 'calls', 'time', 'delta', 'pct', 'bytes', 'flops', 'number', 'ratio']) {
    expect(kinds.has(kind as ColumnKind)).toBe(true);
  }
  expect(table.cases.length).toBeGreaterThan(100);
});

test('formatCell reads every case as the Python catalog does', () => {
  const wrong = table.cases
    .map(c => ({ ...c, got: attempt(() => formatCell(c.kind, valueOf(c.value), undefined, c.unit)) }))
    .filter(c => c.got !== c.text)
    .map(c => `${c.kind}${c.unit ? ` ${c.unit}` : ''} ${c.value}: ${c.got} (want ${c.text})`);
  expect(wrong).toEqual([]);
});
