/**
 * Static fallback for %%torchprof views whose widget is gone.
 *
 * A saved notebook keeps, for every %%torchprof output, the widget reference
 * next to a static HTML rendering (summary and top of the op table). When the
 * notebook is opened again the widget's model no longer exists in the kernel,
 * and the widget manager shows "Error displaying widget: model not found"
 * instead of the output. For our outputs only, this plugin shows the static
 * HTML of the same output in that place, rendered by JupyterLab's own HTML
 * renderer. (An untrusted notebook never renders widgets: JupyterLab shows
 * its HTML by itself.)
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Widget } from '@lumino/widgets';

export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
/** Class of the static HTML that jupyter_torchprof puts in its bundles. */
const STATIC_MARK = 'jp-TorchProf-static';
/** How the widget manager says that the widget's model is gone. */
const MISSING = 'Error displaying widget';

/** True for an output bundle of a torchprof view (widget and static HTML). */
export function isTorchProfBundle(data: { [key: string]: unknown }): boolean {
  const html = data['text/html'];
  const text = Array.isArray(html) ? html.join('') : html;
  return WIDGET_MIME in data && typeof text === 'string' && text.includes(STATIC_MARK);
}

/** True when the widget renderer's node says the model could not be found. */
export function widgetIsMissing(node: HTMLElement): boolean {
  return (node.textContent ?? '').trim().startsWith(MISSING);
}

/** One output of a code cell, as far as this module needs to know it. */
interface IOutputLike {
  data: { [key: string]: unknown };
  trusted: boolean;
}
/** The parts of a notebook this module reads (used structurally). */
interface INotebookLike {
  node: HTMLElement;
  widgets: ReadonlyArray<any>;
  rendermime: { createRenderer(mimeType: string): Widget & { renderModel(m: any): Promise<void> } };
}

/**
 * Show the static HTML of every torchprof output whose widget is reported
 * missing; returns how many outputs were fixed.
 *
 * The widget manager's renderer stays in place (it must, to get its
 * manager); only its error text is replaced by JupyterLab's HTML rendering
 * of the same output.
 */
export function showStaticWhereWidgetsAreLost(notebook: INotebookLike): number {
  let fixed = 0;
  for (const cell of notebook.widgets) {
    const area = cell?.outputArea;
    const outputs = area?.model;
    if (!area || !outputs) {
      continue;
    }
    const children: ReadonlyArray<Widget> = area.widgets ?? [];
    for (let i = 0; i < children.length && i < outputs.length; i++) {
      const model: IOutputLike | undefined = outputs.get(i);
      if (!model || !isTorchProfBundle(model.data)) {
        continue;
      }
      const host = children[i].node;
      if (host.querySelector('.jp-TorchProf-fallback')) {
        continue;
      }
      const target = Array.from(host.querySelectorAll<HTMLElement>('.jp-OutputArea-output')).find(
        widgetIsMissing
      );
      if (!target || !target.isConnected) {
        continue;
      }
      const html = notebook.rendermime.createRenderer('text/html');
      html.addClass('jp-TorchProf-fallback');
      target.textContent = '';
      Widget.attach(html, target);
      void html.renderModel(model);
      fixed++;
    }
  }
  return fixed;
}

/** Keep one notebook's lost torchprof widgets replaced by their static HTML. */
export function watchNotebook(notebook: INotebookLike): MutationObserver {
  let pending = false;
  const observer = new MutationObserver(() => {
    // Mutations come in bursts (typing, rendering): look once per burst.
    if (pending) {
      return;
    }
    pending = true;
    setTimeout(() => {
      pending = false;
      showStaticWhereWidgetsAreLost(notebook);
    }, 200);
  });
  observer.observe(notebook.node, { childList: true, characterData: true, subtree: true });
  return observer;
}

export const fallbackPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-torchprof:static-fallback',
  description: 'Shows the static table of a %%torchprof output whose widget is gone.',
  autoStart: true,
  activate: (app: JupyterFrontEnd): void => {
    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (panel: any) => {
        const notebook: INotebookLike | undefined = panel?.content;
        if (!notebook?.node) {
          return;
        }
        const observer = watchNotebook(notebook);
        panel.disposed?.connect(() => observer.disconnect());
      }
    });
  }
};
