// jsdom has no DragEvent, which @lumino/dragdrop (under @lumino/widgets)
// touches when it loads: give it one before loading the modules.
(globalThis as any).DragEvent = (globalThis as any).DragEvent ?? class extends MouseEvent {};
declare const require: (id: string) => unknown;
/* eslint-disable @typescript-eslint/no-var-requires */
const { Widget } = require('@lumino/widgets') as typeof import('@lumino/widgets');
const { isTorchProfBundle, showStaticWhereWidgetsAreLost, widgetIsMissing, WIDGET_MIME } =
  require('../fallback') as typeof import('../fallback');

const STATIC = '<div class="jp-TorchProf-static"><table><tr><td>aten::mm</td></tr></table></div>';

/** Renders text/html by copying it (stands in for JupyterLab's HTML renderer). */
class Html extends Widget {
  async renderModel(model: any): Promise<void> {
    this.node.innerHTML = model.data['text/html'];
  }
}

/** One output child as the output area builds it: prompt + renderer node. */
function outputChild(text: string) {
  const child = new Widget();
  const prompt = document.createElement('div');
  prompt.className = 'jp-OutputPrompt';
  const out = document.createElement('div');
  out.className = 'jp-OutputArea-output';
  out.textContent = text;
  child.node.append(prompt, out);
  return child;
}

function notebook(outputs: Array<{ data: any; text: string }>) {
  const children = outputs.map(o => outputChild(o.text));
  const models = outputs.map(o => ({ data: o.data, trusted: true }));
  const node = document.createElement('div');
  children.forEach(c => node.appendChild(c.node));
  document.body.appendChild(node);
  return {
    node,
    rendermime: { createRenderer: () => new Html() },
    widgets: [{ outputArea: { widgets: children, model: { length: models.length, get: (i: number) => models[i] } } }],
    children
  };
}

const LOST = 'Error displaying widget: model not found';

describe('static fallback of torchprof outputs', () => {
  test('recognises a torchprof bundle only', () => {
    expect(isTorchProfBundle({ [WIDGET_MIME]: {}, 'text/html': STATIC })).toBe(true);
    expect(isTorchProfBundle({ [WIDGET_MIME]: {}, 'text/html': [STATIC] })).toBe(true);
    expect(isTorchProfBundle({ [WIDGET_MIME]: {}, 'text/html': '<b>other</b>' })).toBe(false);
    expect(isTorchProfBundle({ 'text/html': STATIC })).toBe(false);
  });

  test('a lost torchprof widget shows the static HTML of the same output', async () => {
    const nb = notebook([{ data: { [WIDGET_MIME]: {}, 'text/html': STATIC }, text: LOST }]);
    expect(showStaticWhereWidgetsAreLost(nb)).toBe(1);
    await Promise.resolve();
    const out = nb.children[0].node.querySelector('.jp-OutputArea-output') as HTMLElement;
    expect(out.textContent).toContain('aten::mm');
    expect(widgetIsMissing(out)).toBe(false);
    expect(out.querySelector('.jp-TorchProf-fallback')).not.toBeNull();
    // Looking again changes nothing.
    expect(showStaticWhereWidgetsAreLost(nb)).toBe(0);
  });

  test('live widgets and other lost widgets are left alone', () => {
    const nb = notebook([
      { data: { [WIDGET_MIME]: {}, 'text/html': STATIC }, text: 'the interactive view' },
      { data: { [WIDGET_MIME]: {} }, text: LOST },
      { data: { [WIDGET_MIME]: {}, 'text/html': '<b>someone else</b>' }, text: LOST }
    ]);
    expect(showStaticWhereWidgetsAreLost(nb)).toBe(0);
    expect(nb.children[0].node.textContent).toBe('the interactive view');
    expect(widgetIsMissing(nb.children[1].node.querySelector('.jp-OutputArea-output') as HTMLElement)).toBe(
      true
    );
  });
});
