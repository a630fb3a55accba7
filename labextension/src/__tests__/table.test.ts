import { ColumnSpec, Table, tableColumns } from '../runs';
import { SortableTable } from '../table';

const EVIL = '<img src=x onerror="window.__owned = 1">';
// The specs as the server sends them beside the rows (jupyter_torchprof.columns.OPS).
const specs: ColumnSpec[] = [
  { key: 'name', title: 'Name', kind: 'name', unit: '', tip: '', width: 340, device: false },
  { key: 'calls', title: 'Calls', kind: 'count', unit: '', tip: '', width: 70, device: false },
  { key: 'self_cpu_us', title: 'Self CPU', kind: 'time', unit: 'µs', tip: 'time in the op itself', width: 90 },
  { key: 'self_device_us', title: 'Self device', kind: 'time', unit: 'µs', device: true }
];
const table: Table = {
  specs,
  columns: ['name', 'calls', 'self_cpu_us'],
  rows: [
    ['aten::mm', 4, 30.5],
    [EVIL, 1, 200],
    ['aten::add', 12, null],
    ['aten::relu', 4, 7]
  ],
  total_rows: 4
};

function make(): SortableTable {
  const t = new SortableTable(tableColumns(table, false), table);
  document.body.appendChild(t.node);
  return t;
}

function column(t: SortableTable, index: number): string[] {
  return Array.from(t.node.tBodies[0].rows).map(r => r.cells[index].textContent ?? '');
}

function header(t: SortableTable, key: string): HTMLTableCellElement {
  return t.node.querySelector(`th[data-key="${key}"]`) as HTMLTableCellElement;
}

afterEach(() => {
  document.body.innerHTML = '';
});

test('names are text, never markup', () => {
  const t = make();
  expect(t.node.querySelector('img')).toBeNull();
  expect(column(t, 0)).toContain(EVIL);
  expect((window as any).__owned).toBeUndefined();
});

test('rows start in the server order, formatted', () => {
  const t = make();
  expect(column(t, 0)).toEqual(['aten::mm', EVIL, 'aten::add', 'aten::relu']);
  expect(column(t, 2)).toEqual(['30.5 µs', '200 µs', '–', '7 µs']);
  expect(t.sort).toBeNull();
});

test('a header click sorts; a second click reverses', () => {
  const t = make();
  header(t, 'calls').click(); // numbers: biggest first
  expect(column(t, 1)).toEqual(['12', '4', '4', '1']);
  expect(header(t, 'calls').getAttribute('aria-sort')).toBe('descending');
  header(t, 'calls').click();
  expect(column(t, 1)).toEqual(['1', '4', '4', '12']);
  expect(header(t, 'calls').getAttribute('aria-sort')).toBe('ascending');

  header(t, 'name').click(); // text: A to Z first
  const names = column(t, 0);
  expect(names).toEqual([...names].sort((a, b) => a.localeCompare(b)));
  expect(header(t, 'calls').getAttribute('aria-sort')).toBe('none');
});

test('empty values stay at the bottom', () => {
  const t = make();
  header(t, 'self_cpu_us').click();
  expect(column(t, 2)).toEqual(['200 µs', '30.5 µs', '7 µs', '–']);
  header(t, 'self_cpu_us').click();
  expect(column(t, 2)).toEqual(['7 µs', '30.5 µs', '200 µs', '–']);
});

test('keyboard: Enter on a header sorts', () => {
  const t = make();
  header(t, 'calls').dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
  expect(t.sort).toEqual({ key: 'calls', dir: 'desc' });
});

test('the filter shows matching rows, by substring or regex, and keeps the sort', () => {
  const t = make();
  header(t, 'calls').click();
  expect(t.filter('name', 'aten::')).toBe(3);
  expect(column(t, 0)).toEqual(['aten::add', 'aten::mm', 'aten::relu']);
  expect(t.filter('name', '^aten::(mm|relu)$')).toBe(2);
  expect(column(t, 0)).toEqual(['aten::mm', 'aten::relu']);
  expect(t.filter('name', 'ADD(')).toBe(0); // not a valid regex: a substring
  expect(t.filter('name', '')).toBe(4);
  expect(column(t, 0)[0]).toBe('aten::add');
});
