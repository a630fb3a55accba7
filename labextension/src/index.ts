import { fallbackPlugin } from './fallback';
import { runsPlugin } from './plugin';

/**
 * The JupyterLab side of jupyter_torchprof: the runs sidebar, and the static
 * tables of a saved %%torchprof output whose widget is gone. The inline views
 * need neither: they are one anywidget each (see views/surface.py).
 */
export default [runsPlugin, fallbackPlugin];
