/**
 * A sortable HTML table of one server table (ops, kernels, steps, diffs).
 *
 * Every value goes into the page as text (`textContent`): op and kernel
 * names come from user code and traces, never from us.
 */
import {
  Cell,
  ColumnSpec,
  defaultDir,
  formatCell,
  SortDir,
  sortRows,
  Table
} from './runs';

/** State of the sort, for tests and for restoring it. */
export interface SortState {
  key: string;
  dir: SortDir;
}

/** A `<table>` whose headers sort it on click (and on Enter/Space). */
export class SortableTable {
  readonly node: HTMLTableElement;
  private readonly _specs: ColumnSpec[];
  private readonly _table: Table;
  private readonly _index: Map<string, number>;
  private _rows: Cell[][];
  private _sort: SortState | null = null;
  private _filter: ((row: Cell[]) => boolean) | null = null;
  private readonly _body: HTMLTableSectionElement;
  private readonly _headers = new Map<string, HTMLTableCellElement>();

  constructor(specs: ColumnSpec[], table: Table, className = '') {
    this._specs = specs;
    this._table = table;
    this._index = new Map(table.columns.map((c, i) => [c, i]));
    this._rows = table.rows;
    this.node = document.createElement('table');
    this.node.className = `jp-TorchProf-sortTable ${className}`.trim();
    const head = this.node.createTHead().insertRow();
    for (const spec of specs) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.tabIndex = 0;
      th.dataset.key = spec.key;
      th.className = `jp-TorchProf-sortTh jp-TorchProf-col-${spec.kind}`;
      th.setAttribute('aria-sort', 'none');
      th.textContent = spec.label;
      th.title = spec.help ? `${spec.help} (click to sort)` : 'Click to sort';
      th.addEventListener('click', () => this.toggle(spec.key));
      th.addEventListener('keydown', ev => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          this.toggle(spec.key);
        }
      });
      head.appendChild(th);
      this._headers.set(spec.key, th);
    }
    this._body = this.node.createTBody();
    this._render();
  }

  /** The current sort, or null while rows are in the server's order. */
  get sort(): SortState | null {
    return this._sort;
  }

  /** Sort by `key` in `dir`. */
  sortBy(key: string, dir: SortDir): void {
    const index = this._index.get(key);
    if (index === undefined) {
      return;
    }
    this._sort = { key, dir };
    this._rows = sortRows(this._table.rows, index, dir);
    this._applyFilter();
    for (const [k, th] of this._headers) {
      const state = k === key ? (dir === 'asc' ? 'ascending' : 'descending') : 'none';
      th.setAttribute('aria-sort', state);
      th.classList.toggle('jp-TorchProf-sorted', k === key);
    }
    this._render();
  }

  /**
   * Show only the rows whose `key` column matches `pattern`: a
   * case-insensitive regular expression when it has regex characters and
   * compiles, else a substring, as the inline view's filter. Empty shows all.
   * Returns how many rows are shown.
   */
  filter(key: string, pattern: string): number {
    const index = this._index.get(key);
    const text = pattern.trim();
    if (index === undefined || !text) {
      this._filter = null;
    } else {
      let test: (s: string) => boolean;
      const needle = text.toLowerCase();
      try {
        const rx = /[\^$*+?()[\]{}|\\]/.test(text) ? new RegExp(text, 'i') : null;
        test = rx ? s => rx.test(s) : s => s.toLowerCase().includes(needle);
      } catch {
        test = s => s.toLowerCase().includes(needle);
      }
      this._filter = row => test(String(row[index] ?? ''));
    }
    this._rows = this._sort
      ? sortRows(this._table.rows, this._index.get(this._sort.key) as number, this._sort.dir)
      : this._table.rows;
    this._applyFilter();
    this._render();
    return this._rows.length;
  }

  private _applyFilter(): void {
    if (this._filter) {
      this._rows = this._rows.filter(this._filter);
    }
  }

  /** A header click: first the column's natural order, then the reverse. */
  toggle(key: string): void {
    const spec = this._specs.find(s => s.key === key);
    if (!spec) {
      return;
    }
    const dir: SortDir =
      this._sort && this._sort.key === key
        ? this._sort.dir === 'asc'
          ? 'desc'
          : 'asc'
        : defaultDir(spec.kind);
    this.sortBy(key, dir);
  }

  private _render(): void {
    const body = this._body;
    while (body.firstChild) {
      body.removeChild(body.firstChild);
    }
    for (const row of this._rows) {
      const tr = body.insertRow();
      for (const spec of this._specs) {
        const td = tr.insertCell();
        const value = row[this._index.get(spec.key) as number];
        td.className = `jp-TorchProf-col-${spec.kind}`;
        td.textContent = formatCell(spec.kind, value);
        if (spec.titleFrom !== undefined && this._index.has(spec.titleFrom)) {
          td.title = String(row[this._index.get(spec.titleFrom) as number] ?? '');
        } else if (spec.kind === 'text') {
          td.title = td.textContent;
        }
      }
    }
  }
}
