/**
 * URLs of the runs API (see jupyter_torchprof/server/runs.py).
 *
 * Pure string functions, so they are tested without a server. Every path
 * part is percent-encoded, and run ids are checked against the same pattern
 * the server enforces before any URL is built from them.
 */

/** The extension's namespace under the server's base URL. */
export const NAMESPACE = 'jupyter-torchprof';

/** Run ids as the store makes them (store.RUN_ID_RE). */
export const RUN_ID_PATTERN = /^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}(?:-[a-z0-9]{1,16})?$/;

/** Whether `id` is a well-formed run id. */
export function isRunId(id: unknown): id is string {
  return typeof id === 'string' && RUN_ID_PATTERN.test(id);
}

function checkedId(id: string): string {
  if (!isRunId(id)) {
    throw new Error(`not a run id: ${JSON.stringify(id)}`);
  }
  return id;
}

/** `baseUrl` + namespace + encoded parts, with exactly one `/` between pieces. */
export function apiUrl(baseUrl: string, ...parts: string[]): string {
  const base = baseUrl.replace(/\/+$/, '');
  const path = [NAMESPACE, ...parts]
    .map(p => (p === '.' || p === '..' ? p.replace(/\./g, '%2E') : encodeURIComponent(p)))
    .join('/');
  return `${base}/${path}`;
}

function withQuery(url: string, params: Record<string, string | number | undefined>): string {
  const query = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  return query ? `${url}?${query}` : url;
}

/** `GET runs`. */
export function runsUrl(baseUrl: string): string {
  return apiUrl(baseUrl, 'runs');
}

/** `GET` / `DELETE runs/<id>`. */
export function runUrl(baseUrl: string, id: string): string {
  return apiUrl(baseUrl, 'runs', checkedId(id));
}

/** `GET runs/<id>/tables` (trace index for runs holding several traces). */
export function tablesUrl(baseUrl: string, id: string, trace = 0): string {
  return withQuery(apiUrl(baseUrl, 'runs', checkedId(id), 'tables'), {
    trace: trace || undefined
  });
}

/** `GET runs/<id>/timeline`. */
export function timelineUrl(baseUrl: string, id: string, trace = 0): string {
  return withQuery(apiUrl(baseUrl, 'runs', checkedId(id), 'timeline'), {
    trace: trace || undefined
  });
}

/**
 * `GET runs/<id>/trace` as a link a browser downloads. A cookie-authenticated
 * download must carry the XSRF token, as JupyterLab's own file downloads do.
 */
export function traceUrl(baseUrl: string, id: string, trace = 0, xsrf?: string): string {
  return withQuery(apiUrl(baseUrl, 'runs', checkedId(id), 'trace'), {
    trace: trace || undefined,
    _xsrf: xsrf
  });
}

/** `GET compare?a=&b=` (a is the baseline). */
export function compareUrl(baseUrl: string, a: string, b: string): string {
  return withQuery(apiUrl(baseUrl, 'compare'), { a: checkedId(a), b: checkedId(b) });
}

/** The `_xsrf` cookie's value, if the page has one. */
export function xsrfFromCookie(cookie: string): string | undefined {
  const m = cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
  return m ? m[1] : undefined;
}
