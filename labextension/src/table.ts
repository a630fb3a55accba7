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
  isTextKind,
  SortDir,
  sortRows,
  Table,
  tableColumns
} from './runs';
import { el } from './dom';

/** The CSS classes of a column's cells: text kinds share `col-text` (left-aligned). */
function kindClass(spec: ColumnSpec): string {
  const own = `jp-TorchProf-col-${spec.kind}`;
  return isTextKind(spec.kind) && spec.kind !== 'text' ? `jp-TorchProf-col-text ${own}` : own;
}

/** State of the sort, for tests and for restoring it. */
export interface SortState {
  key: string;
  dir: SortDir;
}

/**
 * A `<table>` whose headers sort it on click (and on Enter/Space). The
 * columns are the catalog's specs as the server sent them: titles, tooltips
 * and formats are never decided here.
 */
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
      th.className = `jp-TorchProf-sortTh ${kindClass(spec)}`;
      th.setAttribute('aria-sort', 'none');
      th.textContent = spec.title;
      th.title = spec.tip ? `${spec.tip} (click to sort)` : 'Click to sort';
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
        td.className = kindClass(spec);
        td.textContent = formatCell(spec.kind, value, spec.labels, spec.unit);
        if (spec.title_key !== undefined && this._index.has(spec.title_key)) {
          td.title = String(row[this._index.get(spec.title_key) as number] ?? '');
        } else if (isTextKind(spec.kind)) {
          td.title = td.textContent;
        }
      }
    }
  }
}

/** A titled section of a run panel. */
export function section(title: string, className: string): HTMLElement {
  const node = el('section', `jp-TorchProf-runSection ${className}`);
  node.appendChild(el('h3', 'jp-TorchProf-runSectionTitle', title));
  return node;
}

/**
 * A titled section holding one table of the server, with the columns the
 * server sent beside its rows (`Table.specs`, from the Python catalog).
 */
export function tableSection(
  title: string,
  className: string,
  table: Table,
  device: boolean,
  what: string,
  filterKey?: string
): HTMLElement {
  const node = section(title, className);
  if (table.rows.length === 0) {
    node.appendChild(el('p', 'jp-TorchProf-runMuted', `No ${what}.`));
    return node;
  }
  if (table.total_rows > table.rows.length) {
    node.appendChild(
      el('p', 'jp-TorchProf-runMuted', `The top ${table.rows.length} of ${table.total_rows} ${what}.`)
    );
  }
  const sortable = new SortableTable(tableColumns(table, device), table);
  if (filterKey) {
    // The inline view's filter: a substring, or a regex like ^aten::(mm|addmm)$.
    const box = el('input', 'jp-TorchProf-runFilter jp-mod-styled');
    box.type = 'search';
    box.placeholder = `filter ${what}: substring or regex`;
    box.setAttribute('aria-label', `Filter ${what}`);
    const count = el('span', 'jp-TorchProf-runMuted jp-TorchProf-runFilterCount');
    box.addEventListener('input', () => {
      const shown = sortable.filter(filterKey, box.value);
      count.textContent = box.value.trim() ? ` ${shown} of ${table.rows.length} match` : '';
    });
    const bar = el('div', 'jp-TorchProf-runFilterBar');
    bar.appendChild(box);
    bar.appendChild(count);
    node.appendChild(bar);
  }
  const wrap = el('div', 'jp-TorchProf-tableWrap');
  wrap.appendChild(sortable.node);
  node.appendChild(wrap);
  return node;
}
