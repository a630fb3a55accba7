import {
  fmtBytes,
  fmtCount,
  fmtDate,
  fmtDelta,
  fmtFlops,
  fmtPct,
  fmtRatio,
  fmtTime,
  fmtWhen,
  MISSING
} from '../format';

declare const require: (id: string) => unknown;

// Expected strings are what jupyter_torchprof.views.format gives for the same
// inputs: the sidebar and the inline views must print a number the same way.
describe('fmtTime', () => {
  const cases: [number, string][] = [
    [0, '0'],
    [0.4567, '457 ns'],
    [1, '1 µs'],
    [1.5, '1.5 µs'],
    [12.345, '12.3 µs'],
    [99.96, '100 µs'],
    [100, '100 µs'],
    [812.4, '812 µs'],
    [1000, '1 ms'],
    [4567.8, '4.57 ms'],
    [123456, '123 ms'],
    [1e6, '1 s'],
    [2.5e6, '2.5 s'],
    [-12.345, '-12.3 µs'],
    [37e6, '37 s']
  ];
  test.each(cases)('%p µs -> %p', (us, text) => {
    expect(fmtTime(us)).toBe(text);
  });

  test('missing values', () => {
    expect(fmtTime(null)).toBe(MISSING);
    expect(fmtTime(undefined)).toBe(MISSING);
    expect(fmtTime(NaN)).toBe(MISSING);
  });
});

test('fmtBytes', () => {
  expect(fmtBytes(0)).toBe('0 B');
  expect(fmtBytes(1023)).toBe('1023 B');
  expect(fmtBytes(1024)).toBe('1 KiB');
  expect(fmtBytes(1536)).toBe('1.5 KiB');
  expect(fmtBytes(3.3 * 2 ** 20)).toBe('3.3 MiB');
  expect(fmtBytes(12.5 * 2 ** 30)).toBe('12.5 GiB');
  expect(fmtBytes(null)).toBe(MISSING);
});

test('fmtPct, fmtCount, fmtFlops', () => {
  expect(fmtPct(0)).toBe('0.0%');
  expect(fmtPct(12.345)).toBe('12.3%');
  expect(fmtPct(100)).toBe('100.0%');
  expect(fmtCount(1234567)).toBe('1,234,567');
  expect(fmtCount(12)).toBe('12');
  expect(fmtCount(2.5)).toBe('2.5'); // a per-step count, as the Python catalog writes it
  expect(fmtFlops(5e11)).toBe('500 GFLOP');
  expect(fmtFlops(2e12)).toBe('2 TFLOP');
  expect(fmtFlops(1500)).toBe('1.5 kFLOP');
  expect(fmtFlops(12)).toBe('12 FLOP');
  expect(fmtFlops(0)).toBe(MISSING);
});

test('fmtFlops gives what the Python catalog gives on the shared table of cases', () => {
  const table = require('../../../tests/data/format_cases/flops.json') as {
    cases: { value: number | null; unit: string; text: string }[];
  };
  expect(table.cases.length).toBeGreaterThan(20);
  for (const c of table.cases) {
    const value = c.value === null ? NaN : c.value;
    expect(`${c.value} ${c.unit} -> ${fmtFlops(value, c.unit)}`).toBe(`${c.value} ${c.unit} -> ${c.text}`);
  }
});

test('fmtDelta and fmtRatio', () => {
  expect(fmtDelta(1500)).toBe('+1.5 ms');
  expect(fmtDelta(-340)).toBe('−340 µs');
  expect(fmtDelta(0)).toBe('0');
  expect(fmtRatio(1.8499)).toBe('1.85×');
  expect(fmtRatio(Infinity)).toBe('new');
  expect(fmtRatio(null)).toBe(MISSING);
});

describe('fmtWhen', () => {
  const now = new Date(2026, 10, 30, 14, 25, 0).getTime();
  const sec = (ms: number) => ms / 1000;
  test('recent runs read relative', () => {
    expect(fmtWhen(sec(now - 5_000), now)).toBe('just now');
    expect(fmtWhen(sec(now - 5 * 60_000), now)).toBe('5 min ago');
    expect(fmtWhen(sec(now - 3 * 3_600_000 - 1), now)).toBe('3 h ago');
  });
  test('older runs show the local date', () => {
    const then = new Date(2026, 0, 2, 3, 4, 0).getTime();
    expect(fmtWhen(sec(then), now)).toBe('2026-01-02 03:04');
    expect(fmtDate(sec(then))).toBe('2026-01-02 03:04');
  });
  test('a stamp in the future is shown literally', () => {
    const later = now + 3_600_000;
    expect(fmtWhen(sec(later), now)).toBe(fmtDate(sec(later)));
  });
  test('unknown', () => {
    expect(fmtWhen(null, now)).toBe(MISSING);
  });
});
