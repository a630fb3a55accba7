import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import { ensureBokeh } from './bokeh';
import { fallbackPlugin } from './fallback';
import { runsPlugin } from './plugin';

/**
 * Makes the inline %%torchprof views work offline: loads BokehJS from the
 * Jupyter server before any notebook output needs it.
 */
const bokehPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-torchprof:bokeh',
  description: 'Loads BokehJS from the Jupyter server for the torchprof views.',
  autoStart: true,
  activate: async (app: JupyterFrontEnd): Promise<void> => {
    try {
      await ensureBokeh();
    } catch (err) {
      console.error(
        'jupyter-torchprof: BokehJS could not be loaded from the server; ' +
          'the interactive views will fall back to static tables.',
        err
      );
    }
  }
};

export default [bokehPlugin, runsPlugin, fallbackPlugin];
