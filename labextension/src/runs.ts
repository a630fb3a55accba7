/**
 * The data of the runs API and the pure logic on it: filtering, ordering,
 * sorting table rows, and which columns a table shows.
 *
 * Nothing here touches the DOM or JupyterLab, so jest tests it directly.
 */
import {
  fmtBytes,
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

/** A DataFrame as the server sends it. */
export interface Table {
  columns: string[];
  rows: Cell[][];
  total_rows: number;
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

export const MEMORY_COLUMNS: ColumnSpec[] = [
  { key: 'device', label: 'Memory of', kind: 'text' },
  {
    key: 'peak_bytes',
    label: 'Peak allocated',
    kind: 'bytes',
    help: 'CPU: counted from the start of profiling; a device: its allocator\'s total'
  },
  { key: 'allocated_bytes', label: 'Allocated', kind: 'bytes', help: 'sum of the allocations' },
  { key: 'allocations', label: 'Allocations', kind: 'count' },
  { key: 'frees', label: 'Frees', kind: 'count' }
];

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

/** How a column's values are shown. */
export type ColumnKind =
  | 'text'
  | 'time'
  | 'delta'
  | 'pct'
  | 'count'
  | 'bytes'
  | 'flops'
  | 'ratio'
  | 'number';

/** A column a table may show, if the data has it. */
export interface ColumnSpec {
  key: string;
  label: string;
  kind: ColumnKind;
  /** Hover text of the header. */
  help?: string;
  /** Column holding the full text shown on hover (e.g. a kernel's long name). */
  titleFrom?: string;
  /** Shown only when the profile traced a device. */
  device?: boolean;
}

/** Format one cell for display. */
export function formatCell(kind: ColumnKind, value: Cell): string {
  if (value === null || value === undefined) {
    return kind === 'text' ? '' : '–';
  }
  if (typeof value !== 'number') {
    return String(value);
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
    case 'bytes':
      return fmtBytes(value);
    case 'flops':
      return fmtFlops(value);
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
  return kind === 'text' ? 'asc' : 'desc';
}

export const OP_COLUMNS: ColumnSpec[] = [
  { key: 'name', label: 'Name', kind: 'text' },
  { key: 'calls', label: 'Calls', kind: 'count' },
  { key: 'self_cpu_us', label: 'Self CPU', kind: 'time', help: 'CPU time minus children' },
  { key: 'cpu_total_us', label: 'CPU total', kind: 'time' },
  { key: 'self_cpu_pct', label: 'Self CPU %', kind: 'pct' },
  {
    key: 'self_device_us',
    label: 'Self device',
    kind: 'time',
    device: true,
    help: 'Device time of kernels launched directly by this op'
  },
  { key: 'device_total_us', label: 'Device total', kind: 'time', device: true },
  { key: 'self_device_pct', label: 'Self device %', kind: 'pct', device: true },
  { key: 'flops', label: 'FLOPs', kind: 'flops' },
  { key: 'self_cpu_mem_bytes', label: 'Self CPU mem', kind: 'bytes' },
  { key: 'self_device_mem_bytes', label: 'Self device mem', kind: 'bytes', device: true }
];

export const KERNEL_COLUMNS: ColumnSpec[] = [
  { key: 'short_name', label: 'Kernel', kind: 'text', titleFrom: 'name' },
  { key: 'kind', label: 'Kind', kind: 'text' },
  { key: 'calls', label: 'Calls', kind: 'count' },
  { key: 'total_us', label: 'Total', kind: 'time' },
  { key: 'pct', label: '%', kind: 'pct' },
  { key: 'mean_us', label: 'Mean', kind: 'time' },
  { key: 'min_us', label: 'Min', kind: 'time' },
  { key: 'max_us', label: 'Max', kind: 'time' },
  { key: 'occupancy', label: 'Occupancy', kind: 'number' },
  { key: 'bandwidth_gbps', label: 'GB/s', kind: 'number' }
];

export const STEP_COLUMNS: ColumnSpec[] = [
  { key: 'step', label: 'Step', kind: 'count' },
  { key: 'wall_us', label: 'Wall', kind: 'time' },
  { key: 'cpu_busy_us', label: 'CPU busy', kind: 'time' },
  { key: 'device_busy_us', label: 'Device busy', kind: 'time', device: true }
];

export const HEADLINE_COLUMNS: ColumnSpec[] = [
  { key: 'metric', label: 'Per step', kind: 'text' },
  { key: 'a_us', label: 'A', kind: 'time', help: 'mean per step' },
  { key: 'a_min_us', label: 'A min', kind: 'time' },
  { key: 'a_max_us', label: 'A max', kind: 'time' },
  { key: 'b_us', label: 'B', kind: 'time', help: 'mean per step' },
  { key: 'b_min_us', label: 'B min', kind: 'time' },
  { key: 'b_max_us', label: 'B max', kind: 'time' },
  { key: 'delta_us', label: 'B − A', kind: 'delta' },
  { key: 'speedup', label: 'Speed-up (A / B)', kind: 'ratio' },
  { key: 'speedup_low', label: '90% low', kind: 'ratio', help: 'bootstrap interval of the speed-up' },
  { key: 'speedup_high', label: '90% high', kind: 'ratio', help: 'bootstrap interval of the speed-up' },
  {
    key: 'verdict',
    label: 'Verdict',
    kind: 'text',
    help: 'faster/slower only when every step of one run beats every step of the other by 5% or more'
  }
];

export const OP_DIFF_COLUMNS: ColumnSpec[] = [
  { key: 'name', label: 'Name', kind: 'text' },
  { key: 'status', label: 'In', kind: 'text', help: 'both, only_a (gone) or only_b (new)' },
  { key: 'calls_a', label: 'Calls A', kind: 'count' },
  { key: 'calls_b', label: 'Calls B', kind: 'count' },
  { key: 'self_cpu_us_a', label: 'Self CPU A', kind: 'time' },
  { key: 'self_cpu_us_b', label: 'Self CPU B', kind: 'time' },
  { key: 'self_cpu_us_delta', label: 'Δ self CPU', kind: 'delta' },
  { key: 'self_device_us_a', label: 'Self device A', kind: 'time', device: true },
  { key: 'self_device_us_b', label: 'Self device B', kind: 'time', device: true },
  { key: 'self_device_us_delta', label: 'Δ self device', kind: 'delta', device: true },
  { key: 'ratio', label: 'B / A', kind: 'ratio' }
];

export const KERNEL_DIFF_COLUMNS: ColumnSpec[] = [
  { key: 'name', label: 'Kernel', kind: 'text' },
  { key: 'status', label: 'In', kind: 'text' },
  { key: 'calls_a', label: 'Calls A', kind: 'count' },
  { key: 'calls_b', label: 'Calls B', kind: 'count' },
  { key: 'total_us_a', label: 'Total A', kind: 'time' },
  { key: 'total_us_b', label: 'Total B', kind: 'time' },
  { key: 'total_us_delta', label: 'Δ total', kind: 'delta' },
  { key: 'ratio', label: 'B / A', kind: 'ratio' }
];

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
