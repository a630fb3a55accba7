import {
  compareOrder,
  filterRuns,
  findingsOf,
  formatCell,
  newestFirst,
  notebookName,
  ColumnSpec,
  RunInfo,
  runBadges,
  runMeta,
  runName,
  shortRunName,
  sortRows,
  Table,
  tableColumns,
  topOp,
  visibleColumns
} from '../runs';

function run(id: string, extra: Partial<RunInfo> = {}): RunInfo {
  return { id, damaged: false, ...extra };
}

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);
const runs: RunInfo[] = [
  run('20261130-100000-aaaaaa', {
    name: 'resnet forward',
    created: NOW / 1000 - 7200,
    device: 'NVIDIA A100',
    top_ops: [{ name: 'aten::convolution', self_us: 1200, calls: 3 }]
  }),
  run('20261130-110000-bbbbbb', {
    name: 'mlp <b>step</b>',
    created: NOW / 1000 - 60 * 5,
    device: 'CPU',
    kind: 'load',
    top_ops: [{ name: 'aten::addmm', self_us: 45, calls: 6 }],
    wall_per_step_us: 1234
  }),
  run('20261130-113000-cccccc', { damaged: true, problem: 'run.json is missing', created: NOW / 1000 - 60 })
];

test('newest first, ties broken by id', () => {
  expect(newestFirst(runs).map(r => r.id)).toEqual([
    '20261130-113000-cccccc',
    '20261130-110000-bbbbbb',
    '20261130-100000-aaaaaa'
  ]);
  const tied = [run('20261130-000000-000001', { created: 5 }), run('20261130-000000-000002', { created: 5 })];
  expect(newestFirst(tied).map(r => r.id)).toEqual(['20261130-000000-000002', '20261130-000000-000001']);
  expect(newestFirst([run('20261130-000000-000001')])).toHaveLength(1); // no created: still listed
});

describe('filter', () => {
  test('every word must match, any field, case-insensitive', () => {
    expect(filterRuns(runs, 'a100').map(r => r.name)).toEqual(['resnet forward']);
    expect(filterRuns(runs, 'ADDMM').map(r => r.name)).toEqual(['mlp <b>step</b>']);
    expect(filterRuns(runs, 'cpu mlp').map(r => r.name)).toEqual(['mlp <b>step</b>']);
    expect(filterRuns(runs, 'cpu resnet')).toEqual([]);
    expect(filterRuns(runs, 'missing').map(r => r.id)).toEqual(['20261130-113000-cccccc']);
    expect(filterRuns(runs, 'loaD').map(r => r.id)).toEqual(['20261130-110000-bbbbbb']);
  });
  test('an empty or blank filter keeps everything, in order', () => {
    expect(filterRuns(runs, '')).toBe(runs);
    expect(filterRuns(runs, '   ')).toBe(runs);
  });
});

test('names, top op and the meta line', () => {
  expect(runName(runs[2])).toBe('20261130-113000-cccccc');
  expect(topOp(runs[0])?.name).toBe('aten::convolution');
  expect(topOp(runs[2])).toBeNull();
  const stepFirst = run('20261130-100000-dddddd', {
    top_ops: [
      { name: 'ProfilerStep*', self_us: 900, calls: 2 },
      { name: 'aten::mm', self_us: 100, calls: 2 }
    ]
  });
  expect(topOp(stepFirst)?.name).toBe('aten::mm');
  expect(runMeta(runs[1], NOW)).toBe('5 min ago · CPU · 1.23 ms/step · loaded');
  expect(runMeta(runs[0], NOW)).toBe('2 h ago · NVIDIA A100');
  expect(runMeta({ ...runs[0], role: 'compiled' }, NOW)).toBe('2 h ago · NVIDIA A100 · compiled');
});

test('compare puts the older run first whatever the selection order', () => {
  const [a, b] = [runs[0], runs[1]];
  expect(compareOrder(a, b).map(r => r.id)).toEqual([a.id, b.id]);
  expect(compareOrder(b, a).map(r => r.id)).toEqual([a.id, b.id]);
});

describe('sortRows', () => {
  const rows = [
    ['b', 3, null],
    ['a', 10, 1],
    ['c', 2, 5],
    ['B', 3, 2]
  ];
  test('numbers sort numerically (10 after 3)', () => {
    expect(sortRows(rows, 1, 'asc').map(r => r[1])).toEqual([2, 3, 3, 10]);
    expect(sortRows(rows, 1, 'desc').map(r => r[1])).toEqual([10, 3, 3, 2]);
  });
  test('stable for ties', () => {
    expect(sortRows(rows, 1, 'asc').map(r => r[0])).toEqual(['c', 'b', 'B', 'a']);
    expect(sortRows(rows, 1, 'desc').map(r => r[0])).toEqual(['a', 'b', 'B', 'c']);
  });
  test('empty cells last in both directions', () => {
    expect(sortRows(rows, 2, 'asc').map(r => r[2])).toEqual([1, 2, 5, null]);
    expect(sortRows(rows, 2, 'desc').map(r => r[2])).toEqual([5, 2, 1, null]);
  });
  test('text sorts as text and leaves the input alone', () => {
    const before = JSON.stringify(rows);
    const names = sortRows(rows, 0, 'asc').map(r => r[0]);
    expect(names.map(n => String(n).toLowerCase())).toEqual(['a', 'b', 'b', 'c']);
    expect(JSON.stringify(rows)).toBe(before);
  });
});

test('columns shown: present in the data, device ones only when traced', () => {
  const table: Table = {
    columns: ['name', 'calls', 'self_cpu_us', 'self_device_us', 'unknown_col'],
    rows: [],
    total_rows: 0
  };
  const specs: ColumnSpec[] = [
    { key: 'name', title: 'Name', kind: 'name' },
    { key: 'calls', title: 'Calls', kind: 'count' },
    { key: 'self_cpu_us', title: 'Self CPU', kind: 'time' },
    { key: 'self_device_us', title: 'Self device', kind: 'time', device: true },
    { key: 'flops', title: 'FLOPs', kind: 'flops' }
  ];
  expect(visibleColumns(specs, table, false).map(c => c.key)).toEqual(['name', 'calls', 'self_cpu_us']);
  expect(tableColumns({ ...table, specs }, false).map(c => c.key)).toEqual(['name', 'calls', 'self_cpu_us']);
  expect(visibleColumns(specs, table, true).map(c => c.key)).toEqual([
    'name',
    'calls',
    'self_cpu_us',
    'self_device_us'
  ]);
});

test('formatCell', () => {
  expect(formatCell('time', 1500)).toBe('1.5 ms');
  expect(formatCell('count', 1500)).toBe('1,500');
  expect(formatCell('text', '<img src=x>')).toBe('<img src=x>');
  expect(formatCell('text', null)).toBe('');
  expect(formatCell('time', null)).toBe('–');
  expect(formatCell('ratio', 2)).toBe('2.00×');
  expect(formatCell('name', null)).toBe('');
  expect(formatCell('calls', 2.5)).toBe('2.5');
  expect(formatCell('calls', 1234.567)).toBe('1,234.57');
  expect(formatCell('calls', 3)).toBe('3');
  expect(formatCell('status', 'only_a', { only_a: 'gone', only_b: 'new' })).toBe('gone');
  expect(formatCell('status', 'both', { only_a: 'gone' })).toBe('both');
});

describe('badges before the name', () => {
  it('tells the two runs of a compare pair apart before the name is cut', () => {
    const eager = run('a', { name: 'y = model(x) [eager]', role: 'eager' });
    const compiled = run('b', { name: 'y = model(x) [compiled]' });
    expect(runBadges(eager)).toEqual(['eager']);
    expect(runBadges(compiled)).toEqual(['compiled']);
    expect(shortRunName(eager)).toBe('y = model(x)');
    expect(shortRunName(compiled)).toBe('y = model(x)');
  });

  it('marks partial runs, not damaged ones', () => {
    expect(runBadges(run('c', { name: 'x', partial: true }))).toEqual(['partial']);
    expect(runBadges(run('d', { name: 'x', partial: true, damaged: true }))).toEqual([]);
    expect(runBadges(run('e', { name: 'x' }))).toEqual([]);
  });

  it('names the notebook by its file name', () => {
    expect(notebookName(run('f', { notebook: 'work/train.ipynb' }))).toBe('train.ipynb');
    expect(notebookName(run('g'))).toBe('');
  });
});

describe('findings of a run', () => {
  it('reads the rows by column name', () => {
    const table: Table = {
      columns: ['severity', 'title', 'detail', 'rule', 'impact_us'],
      rows: [
        ['high', 'Overhead-bound', 'Batch more work per launch', 'overhead', 1200],
        ['not checked', 'copies', 'no device', 'copies', null]
      ],
      total_rows: 2
    };
    expect(findingsOf(table)).toEqual([
      { severity: 'high', title: 'Overhead-bound', detail: 'Batch more work per launch', impactUs: 1200 },
      { severity: 'not checked', title: 'copies', detail: 'no device', impactUs: null }
    ]);
    expect(findingsOf(undefined)).toEqual([]);
  });
});
