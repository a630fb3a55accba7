/**
 * Number and date formatting for the sidebar and run panels.
 *
 * Every numeric kind reads as the Python catalog writes it
 * (jupyter_torchprof/format.py, columns.format_cell), so a number reads the
 * same inline, in the report and in the sidebar: one table of cases
 * (tests/data/format_cases/kinds.json) holds both, and the bokeh tables.
 * Unknown, NaN and infinite values read `–` (a ratio's +∞ reads `new`).
 */

/** Placeholder for a value that is unknown or not measured. */
export const MISSING = '–';

function isMissing(x: number | null | undefined): x is null | undefined {
  return x === null || x === undefined || Number.isNaN(x);
}

/** Unknown, NaN or ±∞: a duration, share, size or count that is not known. */
function notFinite(x: number | null | undefined): x is null | undefined {
  return isMissing(x) || !Number.isFinite(x);
}

/** Thousands separators in the whole part of a number written by toFixed (`1234.5` -> `1,234.5`). */
function withSeparators(text: string): string {
  return text.replace(/^(-?)(\d+)/, (_m, sign: string, whole: string) =>
    sign + whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  );
}

/** Three significant digits under 100, whole numbers from there: `12.3`, `812`, `1234`. */
function threeOrWhole(v: number): string {
  return Math.abs(v) < 100 ? sig3(v) : v.toFixed(0);
}

/** Three significant digits without trailing zeros (Python's `:.3g` in range). */
function sig3(x: number): string {
  return String(Number(x.toPrecision(3)));
}

/** A duration in µs as a short string: `812 ns`, `12.3 µs`, `4.56 ms`, `1.2 s`, `1234 s`. */
export function fmtTime(us: number | null | undefined): string {
  if (notFinite(us)) {
    return MISSING;
  }
  const a = Math.abs(us);
  if (a === 0) {
    return '0';
  }
  if (a < 1) {
    return `${(us * 1e3).toFixed(0)} ns`;
  }
  if (a < 1e3) {
    return `${threeOrWhole(us)} µs`;
  }
  if (a < 1e6) {
    return `${threeOrWhole(us / 1e3)} ms`;
  }
  return `${threeOrWhole(us / 1e6)} s`;
}

/** A signed duration: `+1.2 ms`, `−340 µs` (for diffs). */
export function fmtDelta(us: number | null | undefined): string {
  if (notFinite(us)) {
    return MISSING;
  }
  if (us === 0) {
    return '0';
  }
  return (us > 0 ? '+' : '−') + fmtTime(Math.abs(us));
}

/** A percentage with one decimal. */
export function fmtPct(p: number | null | undefined): string {
  return notFinite(p) ? MISSING : `${p.toFixed(1)}%`;
}

/**
 * A count per step (`calls` columns of a diff): thousands separators and at
 * most two decimals, trailing zeros dropped (`1,234.5`), as the Python views.
 */
export function fmtCalls(n: number | null | undefined): string {
  if (notFinite(n)) {
    return MISSING;
  }
  const text = withSeparators(n.toFixed(2)).replace(/0+$/, '').replace(/\.$/, '');
  return text === '-0' ? '0' : text;
}

/**
 * An integer count with thousands separators (`12,345`); a fractional one
 * (a count per step) as `fmtCalls` (`2.5`), as the Python catalog.
 */
export function fmtCount(n: number | null | undefined): string {
  return fmtCalls(n);
}

/** A byte count with a binary unit. */
export function fmtBytes(b: number | null | undefined): string {
  if (notFinite(b)) {
    return MISSING;
  }
  const a = Math.abs(b);
  const units: [string, number][] = [
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10]
  ];
  for (const [unit, scale] of units) {
    if (a >= scale) {
      return `${sig3(b / scale)} ${unit}`;
    }
  }
  return `${b.toFixed(0)} B`;
}

/** Three significant digits and never an exponent (`999.7` reads `1000`). */
function digits3(v: number): string {
  return Math.abs(v) >= 99.95 ? v.toFixed(0) : sig3(v);
}

const SI_PREFIXES: [string, number][] = [
  ['P', 1e15],
  ['T', 1e12],
  ['G', 1e9],
  ['M', 1e6],
  ['k', 1e3]
];

/**
 * A FLOP count (or, with `unit` `FLOP/s`, a rate) with an SI prefix:
 * `537 MFLOP`, `1.61 GFLOP`; `–` where nothing was counted. The same rule as
 * the Python catalog's `format.fmt_flops` (a test holds them equal).
 */
export function fmtFlops(f: number | null | undefined, unit = 'FLOP'): string {
  if (isMissing(f) || f === 0 || !Number.isFinite(f)) {
    return MISSING;
  }
  const a = Math.abs(f);
  for (const [prefix, scale] of SI_PREFIXES) {
    // 0.9995 of the prefix rounds up to it: "1 GFLOP", not "1000 MFLOP".
    if (a >= 0.9995 * scale) {
      return `${digits3(f / scale)} ${prefix}${unit}`;
    }
  }
  return `${digits3(f)} ${unit}`;
}

/** A ratio such as a speed-up: `1.85×`; `new` for +∞ (nothing before), `–` for -∞. */
export function fmtRatio(r: number | null | undefined): string {
  if (isMissing(r)) {
    return MISSING;
  }
  if (!Number.isFinite(r)) {
    return r > 0 ? 'new' : MISSING;
  }
  return `${r.toFixed(2)}×`;
}

/** A plain number (occupancy, bandwidth, % of peak): one decimal, thousands separators (`1,234.6`). */
export function fmtNumber(x: number | null | undefined): string {
  return notFinite(x) ? MISSING : withSeparators(x.toFixed(1));
}

function pad(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** Local date and time: `2026-11-30 14:25`. */
export function fmtDate(epochSeconds: number | null | undefined): string {
  if (isMissing(epochSeconds)) {
    return MISSING;
  }
  const d = new Date(epochSeconds * 1000);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}`
  );
}

/**
 * When a run was made, relative while recent: `just now`, `5 min ago`,
 * `3 h ago`, then the date.
 */
export function fmtWhen(
  epochSeconds: number | null | undefined,
  nowMs: number = Date.now()
): string {
  if (isMissing(epochSeconds)) {
    return MISSING;
  }
  const ago = nowMs / 1000 - epochSeconds;
  if (ago < -60) {
    return fmtDate(epochSeconds); // clock skew or a future stamp: be literal
  }
  if (ago < 60) {
    return 'just now';
  }
  if (ago < 3600) {
    return `${Math.floor(ago / 60)} min ago`;
  }
  if (ago < 12 * 3600) {
    return `${Math.floor(ago / 3600)} h ago`;
  }
  return fmtDate(epochSeconds);
}
