import {
  apiUrl,
  compareUrl,
  isRunId,
  runsUrl,
  runUrl,
  tablesUrl,
  timelineUrl,
  traceUrl,
  xsrfFromCookie
} from '../urls';

const ID = '20261130-142501-3fa9c1';
const OTHER = '20261130-150000-00ff00';

describe('run ids (same rule as store.RUN_ID_RE)', () => {
  test.each([ID, '20261130-142501-3fa9c1-eager'])('%p is a run id', id => {
    expect(isRunId(id)).toBe(true);
  });
  test.each([
    '..',
    '../x',
    '/etc/passwd',
    `${ID}/..`,
    `${ID}%2F..`,
    '20261130-142501-3FA9C1',
    `${ID}-UPPER`,
    `${ID}-${'x'.repeat(17)}`,
    '',
    ' ' + ID,
    ID + '\n'
  ])('%p is not', id => {
    expect(isRunId(id)).toBe(false);
  });
  test('non-strings', () => {
    expect(isRunId(undefined)).toBe(false);
    expect(isRunId(42)).toBe(false);
  });
});

describe('URLs', () => {
  test('one slash between base and namespace', () => {
    expect(runsUrl('http://h:8888/')).toBe('http://h:8888/jupyter-torchprof/runs');
    expect(runsUrl('http://h:8888/lab/base')).toBe('http://h:8888/lab/base/jupyter-torchprof/runs');
  });

  test('parts are encoded, dot segments too (a browser would resolve them)', () => {
    expect(apiUrl('/b/', 'a/b', '..', 'x y', '.')).toBe('/b/jupyter-torchprof/a%2Fb/%2E%2E/x%20y/%2E');
    expect(apiUrl('/b/', 'a..b')).toBe('/b/jupyter-torchprof/a..b');
  });

  test('run urls', () => {
    expect(runUrl('/', ID)).toBe(`/jupyter-torchprof/runs/${ID}`);
    expect(tablesUrl('/', ID)).toBe(`/jupyter-torchprof/runs/${ID}/tables`);
    expect(tablesUrl('/', ID, 2)).toBe(`/jupyter-torchprof/runs/${ID}/tables?trace=2`);
    expect(timelineUrl('/', ID)).toBe(`/jupyter-torchprof/runs/${ID}/timeline`);
    expect(compareUrl('/', ID, OTHER)).toBe(`/jupyter-torchprof/compare?a=${ID}&b=${OTHER}`);
  });

  test('download links carry the XSRF token, encoded', () => {
    expect(traceUrl('/', ID)).toBe(`/jupyter-torchprof/runs/${ID}/trace`);
    expect(traceUrl('/', ID, 0, '2|ab|cd|123')).toBe(
      `/jupyter-torchprof/runs/${ID}/trace?_xsrf=2%7Cab%7Ccd%7C123`
    );
    expect(traceUrl('/', ID, 1, 'x')).toBe(`/jupyter-torchprof/runs/${ID}/trace?trace=1&_xsrf=x`);
  });

  test('no URL is built from a bad id', () => {
    expect(() => runUrl('/', '../../etc')).toThrow(/not a run id/);
    expect(() => traceUrl('/', `${ID}/../..`)).toThrow();
    expect(() => compareUrl('/', ID, '..')).toThrow();
  });

  test('xsrf cookie', () => {
    expect(xsrfFromCookie('a=1; _xsrf=2|ab|cd; b=2')).toBe('2|ab|cd');
    expect(xsrfFromCookie('_xsrf=tok')).toBe('tok');
    expect(xsrfFromCookie('not_xsrf=1')).toBeUndefined();
    expect(xsrfFromCookie('')).toBeUndefined();
  });
});
