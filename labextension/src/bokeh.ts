/**
 * Load BokehJS from this server, never from a CDN, for the sidebar's run view.
 *
 * The inline views need nothing from this extension: their widget asks the
 * kernel for BokehJS (jupyter_torchprof/views/assets/view.js). The run panel
 * draws its timeline with BokehJS too, and loads it from the server extension
 * (the installed bokeh package's files, so versions always match) when it
 * first needs it. Both loaders look at the other's promise on `window`, so
 * BokehJS starts once per page whichever comes first.
 */
import { PageConfig, URLExt } from '@jupyterlab/coreutils';

/** BokehJS bundles the views need, in load order (core first). */
export const BOKEH_BUNDLES = [
  'bokeh.min.js',
  'bokeh-gl.min.js',
  'bokeh-widgets.min.js',
  'bokeh-tables.min.js'
];

/** Where this loader's promise is kept (the inline view waits for it). */
const LAB_LOADING = '__torchprofBokehLoading';
/** Where the inline view's loader keeps its promise. */
const VIEW_LOADING = '__torchprofBokehPromise';

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

function bokehReady(): boolean {
  const B = (window as any).Bokeh;
  return B !== undefined && B.require !== undefined && B.Tables !== undefined;
}

/** Ensure BokehJS is on the page; resolves once every bundle has loaded. */
export function ensureBokeh(): Promise<void> {
  const w = window as any;
  if (bokehReady()) {
    return Promise.resolve();
  }
  if (w[LAB_LOADING] === undefined) {
    w[LAB_LOADING] = (async () => {
      if (w[VIEW_LOADING] !== undefined) {
        try {
          await w[VIEW_LOADING];
        } catch {
          // the view's kernel could not send it: load it from the server
        }
        if (bokehReady()) {
          return;
        }
      }
      for (const bundle of BOKEH_BUNDLES) {
        await addScript(bokehUrl(bundle));
      }
    })();
  }
  return w[LAB_LOADING];
}
