/**
 * Load BokehJS from this server, never from a CDN.
 *
 * jupyter_bokeh's widget view calls `window.Bokeh.require(...)` and fails when
 * BokehJS is absent; bokeh's own `output_notebook()` would fetch it from a CDN,
 * which fails on offline clusters. The server extension serves the BokehJS
 * files of the installed bokeh package (so versions always match), and this
 * module adds them to the page once.
 */
import { PageConfig, URLExt } from '@jupyterlab/coreutils';

/** BokehJS bundles the views need, in load order (core first). */
export const BOKEH_BUNDLES = [
  'bokeh.min.js',
  'bokeh-gl.min.js',
  'bokeh-widgets.min.js',
  'bokeh-tables.min.js'
];

let loading: Promise<void> | null = null;

function addScript(src: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.src = src;
    script.async = false;
    script.onload = () => resolve();
    script.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.appendChild(script);
  });
}

/** URL of one BokehJS bundle on this server. */
export function bokehUrl(bundle: string, baseUrl?: string): string {
  return URLExt.join(
    baseUrl ?? PageConfig.getBaseUrl(),
    'jupyter-torchprof',
    'static',
    'bokeh',
    bundle
  );
}

/** Ensure BokehJS is on the page; resolves once every bundle has loaded. */
export function ensureBokeh(): Promise<void> {
  if ((window as any).Bokeh !== undefined && (window as any).Bokeh.require) {
    return Promise.resolve();
  }
  if (loading === null) {
    loading = BOKEH_BUNDLES.reduce(
      (chain, bundle) => chain.then(() => addScript(bokehUrl(bundle))),
      Promise.resolve()
    );
  }
  return loading;
}
