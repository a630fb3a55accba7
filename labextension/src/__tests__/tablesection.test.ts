/**
 * The run panel renders the columns the server sends: titles, tooltips and
 * formats come from the specs beside the rows (the Python catalog), and
 * the sidebar keeps no catalog of its own.
 */
import { tableSection } from '../table';
import { ColumnSpec, Table } from '../runs';

// The kernel table's specs as `GET runs/<id>/tables` sends them for a CUDA
// trace (jupyter_torchprof.columns.KERNELS through server.runs.with_specs).
const specs: ColumnSpec[] = [
  { key: 'short_name', title: 'Kernel', kind: 'name', unit: '', tip: '', width: 340, device: false, title_key: 'name' },
  { key: 'kind', title: 'Kind', kind: 'text', unit: '', tip: '', width: 70, device: false },
  { key: 'calls', title: 'Calls', kind: 'count', unit: '', tip: '', width: 70, device: false },
  { key: 'total_us', title: 'Total', kind: 'time', unit: 'µs', tip: '', width: 90, device: false },
  { key: 'pct', title: 'Share', kind: 'pct', unit: '%', tip: 'share of all device time', width: 110, device: false },
  { key: 'median_us', title: 'Median', kind: 'time', unit: 'µs', tip: '', width: 80, device: false },
  { key: 'grid', title: 'Grid', kind: 'text', unit: '', tip: 'launch grid', width: 90, device: false },
  { key: 'block', title: 'Block', kind: 'text', unit: '', tip: 'thread block', width: 90, device: false },
  {
    key: 'launch_delay_us',
    title: 'Launch delay',
    kind: 'time',
    unit: 'µs',
    tip: 'mean time from the launch call to the kernel start',
    width: 100,
    device: false
  }
];
const kernels: Table = {
  columns: ['name', 'short_name', 'kind', 'calls', 'total_us', 'pct', 'median_us', 'grid', 'block', 'launch_delay_us'],
  rows: [
    ['void gemm_kernel<float, 128>(float*)', 'gemm_kernel', 'kernel', 3, 1500, 75, 500, '[1, 2, 3]', '[128, 1, 1]', 4.5],
    ['Memcpy HtoD', 'Memcpy HtoD', 'memcpy', 1, 500, 25, 500, null, null, null]
  ],
  total_rows: 2,
  specs
};

afterEach(() => {
  document.body.innerHTML = '';
});

test('the kernel table shows the titles the server sent, in its order, with its tooltips', () => {
  const node = tableSection('Kernels', 'jp-TorchProf-kernels', kernels, true, 'kernels', 'name');
  document.body.appendChild(node);
  const heads = Array.from(node.querySelectorAll('th'));
  expect(heads.map(th => th.textContent)).toEqual(specs.map(s => s.title));
  expect(heads.map(th => th.dataset.key)).toEqual(specs.map(s => s.key));
  const share = heads.find(th => th.dataset.key === 'pct') as HTMLElement;
  expect(share.title).toBe('share of all device time (click to sort)');
  const first = Array.from(node.querySelectorAll('tbody tr')[0].querySelectorAll('td'));
  expect(first.map(td => td.textContent)).toEqual([
    'gemm_kernel', 'kernel', '3', '1.5 ms', '75.0%', '500 µs', '[1, 2, 3]', '[128, 1, 1]', '4.5 µs'
  ]);
  // the short name's cell carries the full name
  expect(first[0].title).toBe('void gemm_kernel<float, 128>(float*)');
});

test('other titles from the server are shown as sent (no catalog in the sidebar)', () => {
  const renamed = { ...kernels, specs: specs.map(s => ({ ...s, title: `${s.title}!` })) };
  const node = tableSection('Kernels', 'jp-TorchProf-kernels', renamed, true, 'kernels');
  expect(Array.from(node.querySelectorAll('th')).map(th => th.textContent)).toEqual(
    specs.map(s => `${s.title}!`)
  );
});

test('device columns the server sent are left out when the device was not traced', () => {
  const ops: Table = {
    columns: ['name', 'self_cpu_us', 'self_device_us'],
    rows: [['aten::mm', 10, 0]],
    total_rows: 1,
    specs: [
      { key: 'name', title: 'Name', kind: 'name' },
      { key: 'self_cpu_us', title: 'Self CPU', kind: 'time' },
      { key: 'self_device_us', title: 'Self device', kind: 'time', device: true }
    ]
  };
  const node = tableSection('Ops', 'jp-TorchProf-ops', ops, false, 'ops');
  expect(Array.from(node.querySelectorAll('th')).map(th => th.textContent)).toEqual(['Name', 'Self CPU']);
});

test('a diff status reads as the labels the server sent', () => {
  const diff: Table = {
    columns: ['name', 'status'],
    rows: [['aten::mm', 'only_a'], ['aten::add', 'only_b'], ['aten::relu', 'both']],
    total_rows: 3,
    specs: [
      { key: 'name', title: 'Name', kind: 'name' },
      { key: 'status', title: 'Status', kind: 'status', labels: { both: 'both', only_a: 'gone', only_b: 'new' } }
    ]
  };
  const node = tableSection('Ops (per step)', 'jp-TorchProf-opDiff', diff, false, 'ops');
  const cells = Array.from(node.querySelectorAll('tbody tr')).map(tr => tr.querySelectorAll('td')[1].textContent);
  expect(cells).toEqual(['gone', 'new', 'both']);
});
