/**
 * The data of the runs API and the pure logic on it: filtering, ordering,
 * sorting table rows, and which columns a table shows.
 *
 * Nothing here touches the DOM or JupyterLab, so jest tests it directly.
 */
import {
  fmtBytes,
  fmtCalls,
  fmtCount,
  fmtDelta,
  fmtFlops,
  fmtNumber,
  fmtPct,
  fmtRatio,
  fmtTime,
  fmtWhen
} from './format';

/** One of a run's top ops as stored in run.json. */
export interface TopOp {
  name: string;
  self_us: number;
  calls: number;
}

/** A run as listed (its run.json; damaged runs carry `problem`). */
export interface RunInfo {
  id: string;
  name?: string;
  kind?: string;
  created?: number | null;
  device?: string;
  device_traced?: boolean;
  steps?: number;
  wall_per_step_us?: number | null;
  cpu_busy_per_step_us?: number | null;
  device_busy_per_step_us?: number | null;
  device_busy_pct?: number | null;
  events?: number;
  top_ops?: TopOp[];
  notebook?: string | null;
  cell?: string;
  source?: string;
  ranks?: number;
  traces?: string[];
  /** Device traces kept with the run (TorchTPU's XPlane, Neuron Explorer's files). */
  device_files?: string[];
  /** `eager` or `compiled` for the two runs of `%%torchprof --compare`. */
  role?: string;
  /** Id of the other run of such a pair. */
  pair?: string;
  partial?: boolean;
  error?: string | null;
  notes?: string[];
  damaged: boolean;
  problem?: string;
  running?: boolean;
}

/** Reply of `GET runs`. */
export interface RunList {
  root: string;
  runs: RunInfo[];
  size_bytes: number;
  timeline: boolean;
}

/** A JSON cell of a table. */
export type Cell = string | number | boolean | null;

/** A DataFrame as the server sends it, with the catalog's specs of the columns it shows. */
export interface Table {
  columns: string[];
  rows: Cell[][];
  total_rows: number;
  /** The columns to show, in order (`jupyter_torchprof.columns`, sent by the server). */
  specs?: ColumnSpec[];
}

/** Headline numbers of a profile (`Profile.summary`). */
export interface Summary {
  device?: string;
  device_traced?: boolean;
  steps?: number;
  wall_per_step_us?: number | null;
  cpu_busy_per_step_us?: number | null;
  device_busy_per_step_us?: number | null;
  device_busy_pct?: number | null;
  events?: number;
  kernels?: number;
  rank?: number | null;
  world_size?: number | null;
  partial?: boolean;
  error?: string;
  notes?: string[];
  [key: string]: unknown;
}

/** Reply of `GET runs/<id>/tables`. */
export interface RunTables {
  id: string;
  info: RunInfo;
  trace: string;
  traces: string[];
  timeline: boolean;
  summary: Summary;
  ops: Table;
  kernels: Table;
  steps: Table;
  /** `Profile.findings`: severity, title, detail (the remedy), rule, impact_us. */
  findings?: Table;
  /** Peak memory per device (`analysis.memory.memory_peaks`), empty without --memory. */
  memory?: Table;
}

/** One finding of a run's table, by column name. */
export interface Finding {
  severity: string;
  title: string;
  detail: string;
  impactUs: number | null;
}

/** The rows of a findings table as objects (missing columns read as empty). */
export function findingsOf(table: Table | undefined): Finding[] {
  if (!table) {
    return [];
  }
  const at = (name: string) => table.columns.indexOf(name);
  const [s, t, d, i] = [at('severity'), at('title'), at('detail'), at('impact_us')];
  return table.rows.map(row => ({
    severity: s >= 0 ? String(row[s] ?? '') : '',
    title: t >= 0 ? String(row[t] ?? '') : '',
    detail: d >= 0 ? String(row[d] ?? '') : '',
    impactUs: i >= 0 && typeof row[i] === 'number' ? (row[i] as number) : null
  }));
}

/** Reply of `GET compare`. */
export interface Comparison {
  a: RunInfo;
  b: RunInfo;
  labels: [string, string];
  headline: Table;
  ops: Table;
  kernels: Table;
  summary_a: Summary;
  summary_b: Summary;
  /** What to keep in mind reading it (e.g. both runs profiled the same cell). */
  notes?: string[];
}

/** The run's display name (damaged runs have only an id). */
export function runName(run: RunInfo): string {
  return run.name || run.id;
}

/** The ` [eager]` / ` [compiled]` suffix `%%torchprof --compare` gives its two runs' names. */
const ROLE_SUFFIX = /\s\[(eager|compiled)\]$/;

/**
 * The badges a run's row starts with: its side of a `--compare` pair
 * (`eager`, `compiled`) and whether it is partial. They come before the name,
 * which the list may cut short, so the two runs of a pair never look alike.
 */
export function runBadges(run: RunInfo): string[] {
  const out: string[] = [];
  const suffix = ROLE_SUFFIX.exec(run.name ?? '');
  const role = run.role || (suffix ? suffix[1] : '');
  if (role) {
    out.push(role);
  }
  if (run.partial && !run.damaged) {
    out.push('partial');
  }
  return out;
}

/** The name without the ` [eager]` / ` [compiled]` suffix its badge shows. */
export function shortRunName(run: RunInfo): string {
  return runName(run).replace(ROLE_SUFFIX, '');
}

/** The notebook a run came from, as its file name (empty when unknown). */
export function notebookName(run: RunInfo): string {
  const path = run.notebook ?? '';
  return path.split('/').pop() ?? '';
}

/**
 * The op that took the most time, if known. The `ProfilerStep#k` ranges are
 * skipped: their self time is the time between ops, not an op.
 */
export function topOp(run: RunInfo): TopOp | null {
  const ops = (run.top_ops ?? []).filter(op => !op.name.startsWith('ProfilerStep'));
  return ops.length > 0 ? ops[0] : null;
}

/** One line under a run's name: when, device, wall time per step, `loaded`, eager/compiled. */
export function runMeta(run: RunInfo, nowMs: number = Date.now()): string {
  const parts = [fmtWhen(run.created, nowMs)];
  if (run.device) {
    parts.push(run.device);
  }
  if (run.wall_per_step_us !== undefined && run.wall_per_step_us !== null) {
    parts.push(`${fmtTime(run.wall_per_step_us)}/step`);
  }
  if (run.kind === 'load') {
    parts.push('loaded');
  }
  if (run.role) {
    parts.push(run.role);
  }
  return parts.join(' · ');
}

/** Runs newest first (then by id, which starts with the time). */
export function newestFirst(runs: RunInfo[]): RunInfo[] {
  return [...runs].sort((a, b) => {
    const dt = (b.created ?? 0) - (a.created ?? 0);
    if (dt !== 0) {
      return dt;
    }
    return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
  });
}

/**
 * Runs matching every word of `query` (case-insensitive) in their name,
 * device, kind, notebook, top op, id or problem.
 */
export function filterRuns(runs: RunInfo[], query: string): RunInfo[] {
  const terms = query.toLowerCase().split(/\s+/).filter(t => t.length > 0);
  if (terms.length === 0) {
    return runs;
  }
  return runs.filter(run => {
    const top = topOp(run);
    const hay = [
      runName(run),
      run.device ?? '',
      run.kind ?? '',
      run.notebook ?? '',
      top ? top.name : '',
      run.id,
      run.problem ?? ''
    ]
      .join('\n')
      .toLowerCase();
    return terms.every(t => hay.includes(t));
  });
}

/** The two selected runs in compare order: older (baseline) first. */
export function compareOrder(a: RunInfo, b: RunInfo): [RunInfo, RunInfo] {
  const [older] = newestFirst([a, b]).reverse();
  return older === a ? [a, b] : [b, a];
}

/** Sort direction of a table column. */
export type SortDir = 'asc' | 'desc';

function compareCells(x: Cell, y: Cell): number {
  if (typeof x === 'number' && typeof y === 'number') {
    return x - y;
  }
  return String(x).localeCompare(String(y));
}

/**
 * Rows sorted by column `index`, stable; empty cells (null) always last.
 */
export function sortRows(rows: Cell[][], index: number, dir: SortDir): Cell[][] {
  const sign = dir === 'asc' ? 1 : -1;
  return rows
    .map((row, i) => ({ row, i }))
    .sort((p, q) => {
      const x = p.row[index];
      const y = q.row[index];
      const xNull = x === null || x === undefined;
      const yNull = y === null || y === undefined;
      if (xNull || yNull) {
        return xNull === yNull ? p.i - q.i : xNull ? 1 : -1;
      }
      return sign * compareCells(x, y) || p.i - q.i;
    })
    .map(p => p.row);
}

/**
 * How a column's values are shown: the kinds of `jupyter_torchprof.columns`
 * (`KINDS`), the one vocabulary every renderer uses.
 */
export type ColumnKind =
  | 'name'
  | 'text'
  | 'status'
  | 'count'
  | 'calls'
  | 'time'
  | 'delta'
  | 'pct'
  | 'bytes'
  | 'flops'
  | 'number'
  | 'ratio';

/** Kinds whose values are text (left-aligned, A→Z on the first click). */
const TEXT_KINDS: ReadonlySet<string> = new Set(['name', 'text', 'status']);

/** Whether a kind's values are text rather than numbers. */
export function isTextKind(kind: ColumnKind): boolean {
  return TEXT_KINDS.has(kind);
}

/** A column as the server's catalog describes it (`Column.to_json`). */
export interface ColumnSpec {
  key: string;
  title: string;
  kind: ColumnKind;
  /** Unit of the raw value (`µs`, `B`, `%`...). */
  unit?: string;
  /** Hover text of the header. */
  tip?: string;
  /** Width hint in pixels. */
  width?: number;
  /** Column holding the full text shown on hover (a kernel's long name). */
  title_key?: string;
  /** Shown only when the profile traced a device. */
  device?: boolean;
  /** For `status`: how each value reads (`only_a` → `gone`). */
  labels?: Record<string, string>;
}

/** Format one cell for display (`labels`: a status column's readings). */
export function formatCell(
  kind: ColumnKind,
  value: Cell,
  labels?: Record<string, string>,
  unit?: string
): string {
  if (value === null || value === undefined) {
    return isTextKind(kind) ? '' : '–';
  }
  if (typeof value !== 'number') {
    const text = String(value);
    return kind === 'status' && labels && text in labels ? labels[text] : text;
  }
  switch (kind) {
    case 'time':
      return fmtTime(value);
    case 'delta':
      return fmtDelta(value);
    case 'pct':
      return fmtPct(value);
    case 'count':
      return fmtCount(value);
    case 'calls':
      return fmtCalls(value);
    case 'bytes':
      return fmtBytes(value);
    case 'flops':
      return fmtFlops(value, unit || 'FLOP');
    case 'ratio':
      return fmtRatio(value);
    case 'number':
      return fmtNumber(value);
    default:
      return String(value);
  }
}

/** Whether a column sorts biggest-first on the first click. */
export function defaultDir(kind: ColumnKind): SortDir {
  return isTextKind(kind) ? 'asc' : 'desc';
}

/**
 * The columns a table shows: the specs the server sent, those present in
 * the data, device ones only when traced. A table sent without specs (an
 * older server) shows its raw columns, numbers as numbers.
 */
export function tableColumns(table: Table, deviceTraced: boolean): ColumnSpec[] {
  if (table.specs === undefined) {
    return table.columns.map(key => ({
      key,
      title: key,
      kind: table.rows.some(r => typeof r[table.columns.indexOf(key)] === 'number') ? 'number' : 'text'
    }));
  }
  return visibleColumns(table.specs, table, deviceTraced);
}

/** The specs a table can show: present in the data, device columns only when traced. */
export function visibleColumns(
  specs: ColumnSpec[],
  table: Table,
  deviceTraced: boolean
): ColumnSpec[] {
  return specs.filter(
    s => table.columns.includes(s.key) && (deviceTraced || !s.device)
  );
}
