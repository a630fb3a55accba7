/**
 * The runs plugin: the sidebar in the left area, the run and compare panels
 * in the main area, their commands, and their restoration after a reload.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';
import { NotebookActions } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import { RunsApi } from './api';
import { DiffView, panel, RunView } from './runpanel';
import { RunsSidebar } from './sidebar';
import { isRunId } from './urls';

/** Command ids. */
export namespace CommandIDs {
  export const openRun = 'jupyter-torchprof:open-run';
  export const compare = 'jupyter-torchprof:compare';
  export const showRuns = 'jupyter-torchprof:show-runs';
  export const refreshRuns = 'jupyter-torchprof:refresh-runs';
}

/** Whether a finished cell may have made a run (cheap check of its source). */
function mayHaveProfiled(source: string): boolean {
  return source.includes('torchprof');
}

export const runsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-torchprof:runs',
  description: 'Sidebar of %%torchprof runs: open, compare, download, delete.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, ISettingRegistry, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    settings: ISettingRegistry | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load('jupyter_torchprof');
    const api = new RunsApi(app.serviceManager.serverSettings);
    const runs = new WidgetTracker<MainAreaWidget<RunView>>({ namespace: 'jupyter-torchprof-run' });
    const diffs = new WidgetTracker<MainAreaWidget<DiffView>>({
      namespace: 'jupyter-torchprof-compare'
    });

    const sidebar = new RunsSidebar({
      api,
      trans,
      openRun: id => void app.commands.execute(CommandIDs.openRun, { id }),
      compare: (a, b) => void app.commands.execute(CommandIDs.compare, { a, b })
    });
    app.shell.add(sidebar, 'left', { rank: 650 });

    // "Refresh every (seconds)" from the settings (schema/runs.json).
    if (settings) {
      const apply = (s: ISettingRegistry.ISettings) => {
        sidebar.pollMs = 1000 * Number(s.get('refreshSeconds').composite ?? 4);
      };
      void settings.load(runsPlugin.id).then(s => {
        apply(s);
        s.changed.connect(apply);
      }).catch(() => undefined); // no settings: the default period
    }

    sidebar.runDeleted.connect((_, id) => {
      runs.forEach(w => {
        if (w.content.runId === id) {
          w.dispose();
        }
      });
      diffs.forEach(w => {
        if (w.content.a === id || w.content.b === id) {
          w.dispose();
        }
      });
    });

    app.commands.addCommand(CommandIDs.openRun, {
      label: trans.__('Open Profiler Run'),
      execute: async args => {
        const id = args.id as string;
        const trace = Number(args.trace ?? 0) || 0;
        if (!isRunId(id)) {
          throw new Error(`not a run id: ${String(id)}`);
        }
        const open = runs.find(w => w.content.runId === id);
        if (open) {
          app.shell.activateById(open.id);
          return open;
        }
        const widget = panel(new RunView(api, id, trace), `jupyter-torchprof-run-${id}`, id);
        await runs.add(widget);
        app.shell.add(widget, 'main');
        app.shell.activateById(widget.id);
        return widget;
      }
    });

    app.commands.addCommand(CommandIDs.compare, {
      label: trans.__('Compare Profiler Runs'),
      execute: async args => {
        const a = args.a as string;
        const b = args.b as string;
        if (!isRunId(a) || !isRunId(b)) {
          throw new Error('compare needs two run ids');
        }
        const open = diffs.find(w => w.content.a === a && w.content.b === b);
        if (open) {
          app.shell.activateById(open.id);
          return open;
        }
        const widget = panel(new DiffView(api, a, b), `jupyter-torchprof-compare-${a}-${b}`, 'Compare');
        await diffs.add(widget);
        app.shell.add(widget, 'main');
        app.shell.activateById(widget.id);
        return widget;
      }
    });

    app.commands.addCommand(CommandIDs.showRuns, {
      label: trans.__('Show Profiler Runs'),
      execute: () => app.shell.activateById(sidebar.id)
    });

    app.commands.addCommand(CommandIDs.refreshRuns, {
      label: trans.__('Refresh Profiler Runs'),
      execute: () => sidebar.refresh()
    });

    if (palette) {
      const category = trans.__('Profiler');
      palette.addItem({ command: CommandIDs.showRuns, category });
      palette.addItem({ command: CommandIDs.refreshRuns, category });
    }

    // A %%torchprof cell writes its run before it finishes: list it right away.
    NotebookActions.executed.connect((_, { cell }) => {
      if (mayHaveProfiled(cell.model.sharedModel.getSource())) {
        sidebar.scheduleRefresh();
      }
    });

    if (restorer) {
      restorer.add(sidebar, 'jupyter-torchprof-runs');
      void restorer.restore(runs, {
        command: CommandIDs.openRun,
        args: w => ({ id: w.content.runId, trace: w.content.trace }),
        name: w => w.content.runId
      });
      void restorer.restore(diffs, {
        command: CommandIDs.compare,
        args: w => ({ a: w.content.a, b: w.content.b }),
        name: w => `${w.content.a}..${w.content.b}`
      });
    }
  }
};
