/**
 * Requests to the runs API through JupyterLab's server connection (which
 * adds the token and the XSRF header).
 */
import { ServerConnection } from '@jupyterlab/services';

import { Comparison, RunInfo, RunList, RunTables } from './runs';
import {
  compareUrl,
  runsUrl,
  runUrl,
  tablesUrl,
  timelineUrl,
  traceUrl,
  xsrfFromCookie
} from './urls';

/** A request the server answered with an error; `message` is the server's. */
export class ApiError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** The runs API of one Jupyter server. */
export class RunsApi {
  readonly settings: ServerConnection.ISettings;

  constructor(settings?: ServerConnection.ISettings) {
    this.settings = settings ?? ServerConnection.makeSettings();
  }

  private get base(): string {
    return this.settings.baseUrl;
  }

  private async request<T>(url: string, init: RequestInit = {}): Promise<T> {
    let resp: Response;
    try {
      resp = await ServerConnection.makeRequest(url, init, this.settings);
    } catch (err) {
      throw new ApiError(0, `cannot reach the Jupyter server (${String(err)})`);
    }
    if (!resp.ok) {
      let message = resp.statusText;
      try {
        const body = await resp.json();
        if (body && typeof body.message === 'string') {
          message = body.message;
        }
      } catch {
        // not JSON: keep the status text
      }
      if (resp.status === 404 && url.endsWith('/runs')) {
        message = 'the jupyter_torchprof server extension is not enabled on this server';
      }
      throw new ApiError(resp.status, message);
    }
    if (resp.status === 204) {
      return undefined as T;
    }
    return (await resp.json()) as T;
  }

  /** Every run, newest first. */
  list(): Promise<RunList> {
    return this.request<RunList>(runsUrl(this.base));
  }

  /** One run's run.json. */
  info(id: string): Promise<RunInfo> {
    return this.request<RunInfo>(runUrl(this.base, id));
  }

  /** Summary and tables of one trace of a run. */
  tables(id: string, trace = 0): Promise<RunTables> {
    return this.request<RunTables>(tablesUrl(this.base, id, trace));
  }

  /** The timeline as a bokeh `json_item`. */
  timeline(id: string, trace = 0): Promise<any> {
    return this.request<any>(timelineUrl(this.base, id, trace));
  }

  /** Delete a run. */
  remove(id: string): Promise<void> {
    return this.request<void>(runUrl(this.base, id), { method: 'DELETE' });
  }

  /** Run `a` (baseline) against run `b`. */
  compare(a: string, b: string): Promise<Comparison> {
    return this.request<Comparison>(compareUrl(this.base, a, b));
  }

  /** A link that downloads the run's trace. */
  downloadUrl(id: string, trace = 0): string {
    let cookie = '';
    try {
      cookie = document.cookie;
    } catch {
      // a sandboxed page has no cookies; the token header is not needed for links then
    }
    return traceUrl(this.base, id, trace, xsrfFromCookie(cookie));
  }
}
