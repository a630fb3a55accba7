/**
 * The runs sidebar: every run of the store, newest first, with a filter,
 * open / download / delete per run, and Compare for two selected runs.
 *
 * It refreshes itself: on demand (a notebook cell that used %%torchprof has
 * finished) and by polling every few seconds while it is visible, so runs
 * from consoles, scripts and other notebooks appear too.
 */
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { deleteIcon, downloadIcon, refreshIcon } from '@jupyterlab/ui-components';
import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { Message } from '@lumino/messaging';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { ApiError, RunsApi } from './api';
import { clear, el } from './dom';
import { fmtBytes, fmtDate, fmtTime, fmtWhen } from './format';
import { torchprofIcon } from './icons';
import {
  compareOrder,
  filterRuns,
  newestFirst,
  notebookName,
  RunInfo,
  runBadges,
  runMeta,
  runName,
  shortRunName,
  topOp
} from './runs';

/** Options of the sidebar. */
export interface IRunsSidebarOptions {
  api: RunsApi;
  /** Open a run in the main area. */
  openRun: (id: string) => void;
  /** Open the comparison of two runs (a = baseline). */
  compare: (a: string, b: string) => void;
  /** Poll period while visible (ms). */
  pollMs?: number;
  /** The translator's bundle for the sidebar's own strings. */
  trans?: TranslationBundle;
}

export class RunsSidebar extends Widget {
  private readonly _api: RunsApi;
  private readonly _options: IRunsSidebarOptions;
  private readonly _list: HTMLUListElement;
  private readonly _status: HTMLDivElement;
  private readonly _filter: HTMLInputElement;
  private readonly _compareButton: HTMLButtonElement;
  private _runs: RunInfo[] = [];
  private _root = '';
  private _sizeBytes = 0;
  private _error: string | null = null;
  private _loaded = false;
  private readonly _selected = new Set<string>();
  private _signature = '';
  private _poll: Poll | null = null;
  private _pending: number | null = null;
  private _inFlight: Promise<void> | null = null;
  private readonly _runDeleted = new Signal<this, string>(this);

  constructor(options: IRunsSidebarOptions) {
    super();
    this._api = options.api;
    this._options = options;
    this.id = 'jupyter-torchprof-runs';
    this.addClass('jp-TorchProf-sidebar');
    this.title.icon = torchprofIcon;
    const trans = options.trans ?? nullTranslator.load('jupyter_torchprof');
    this.title.caption = trans.__('Profiler runs (%%torchprof)');

    const header = el('div', 'jp-TorchProf-sidebarHeader');
    header.appendChild(el('h2', 'jp-TorchProf-sidebarTitle', trans.__('Profiler runs')));
    const tools = el('div', 'jp-TorchProf-sidebarTools');
    this._compareButton = el('button', 'jp-TorchProf-runButton jp-TorchProf-compare', trans.__('Compare'));
    this._compareButton.title = trans.__('Select two runs, then compare them (older = baseline)');
    this._compareButton.disabled = true;
    this._compareButton.addEventListener('click', () => this._compareSelected());
    const refresh = el('button', 'jp-TorchProf-iconButton jp-TorchProf-refresh');
    refresh.title = trans.__('Refresh the list');
    refresh.setAttribute('aria-label', 'Refresh');
    refresh.appendChild(refreshIcon.element({ tag: 'span' }));
    refresh.addEventListener('click', () => void this.refresh());
    tools.append(this._compareButton, refresh);
    header.appendChild(tools);

    this._filter = el('input', 'jp-TorchProf-runFilter jp-mod-styled');
    this._filter.type = 'search';
    this._filter.placeholder = 'Filter: name, device, op…';
    this._filter.setAttribute('aria-label', 'Filter runs');
    this._filter.addEventListener('input', () => this._render(true));

    this._status = el('div', 'jp-TorchProf-runStatus');
    this._list = el('ul', 'jp-TorchProf-runList');
    this.node.append(header, this._filter, this._status, this._list);
    this._render(true);
  }

  /** Emitted with a run's id after the user deleted it. */
  get runDeleted(): ISignal<this, string> {
    return this._runDeleted;
  }

  /** The runs as last listed (newest first). */
  get runs(): RunInfo[] {
    return this._runs;
  }

  /** Fetch the list again and redraw if anything changed. */
  refresh(): Promise<void> {
    if (this._inFlight) {
      return this._inFlight;
    }
    this._inFlight = (async () => {
      try {
        const data = await this._api.list();
        this._runs = newestFirst(data.runs);
        this._root = data.root;
        this._sizeBytes = data.size_bytes;
        this._error = null;
        const ids = new Set(this._runs.map(r => r.id));
        for (const id of [...this._selected]) {
          if (!ids.has(id)) {
            this._selected.delete(id);
          }
        }
      } catch (err) {
        this._error = err instanceof ApiError ? err.message : String(err);
      } finally {
        this._loaded = true;
        this._inFlight = null;
      }
      this._render(false);
    })();
    return this._inFlight;
  }

  /** Refresh soon (several triggers in a row cost one request). */
  scheduleRefresh(delayMs = 300): void {
    if (this._pending !== null) {
      window.clearTimeout(this._pending);
    }
    this._pending = window.setTimeout(() => {
      this._pending = null;
      void this.refresh();
    }, delayMs);
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.refresh();
    this._startPolling();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      void this.refresh();
      this._startPolling();
    }
  }

  protected onBeforeHide(msg: Message): void {
    super.onBeforeHide(msg);
    this._stopPolling();
  }

  protected onBeforeDetach(msg: Message): void {
    this._stopPolling();
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    this._stopPolling();
    if (this._pending !== null) {
      window.clearTimeout(this._pending);
    }
    super.dispose();
  }

  /** The poll period (ms); the settings' "Refresh every" changes it while open. */
  set pollMs(ms: number) {
    this._options.pollMs = ms;
    if (this._poll !== null) {
      this._poll.frequency = this._frequency();
    }
  }

  private _frequency(): { interval: number; backoff: boolean; max: number } {
    const interval = Math.max(1000, this._options.pollMs ?? 4000);
    // A server that does not answer is asked less and less often.
    return { interval, backoff: true, max: 10 * interval };
  }

  private _startPolling(): void {
    if (this._poll !== null) {
      return;
    }
    this._poll = new Poll({
      factory: () => this.refresh(),
      frequency: this._frequency(),
      // Nothing to refresh while the panel or the browser tab is hidden.
      standby: () => !this.isVisible || 'when-hidden',
      name: 'jupyter-torchprof:runs'
    });
  }

  private _stopPolling(): void {
    if (this._poll !== null) {
      this._poll.dispose();
      this._poll = null;
    }
  }

  private _compareSelected(): void {
    const chosen = this._runs.filter(r => this._selected.has(r.id));
    if (chosen.length !== 2) {
      return;
    }
    const [a, b] = compareOrder(chosen[0], chosen[1]);
    this._options.compare(a.id, b.id);
  }

  private async _delete(run: RunInfo): Promise<void> {
    const result = await showDialog({
      title: 'Delete run',
      body: `Delete “${runName(run)}” and its trace? This cannot be undone.`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      await this._api.remove(run.id);
    } catch (err) {
      await showErrorMessage(
        'Could not delete the run',
        err instanceof Error ? err.message : String(err)
      );
      return;
    }
    this._selected.delete(run.id);
    this._runDeleted.emit(run.id);
    await this.refresh();
  }

  private _updateCompareButton(): void {
    const n = this._runs.filter(r => this._selected.has(r.id)).length;
    this._compareButton.disabled = n !== 2;
    this._compareButton.textContent = n === 0 || n === 2 ? 'Compare' : `Compare (${n}/2)`;
  }

  /** Redraw the list when what it shows changed (or always with `force`). */
  private _render(force: boolean): void {
    const now = Date.now();
    const shown = filterRuns(this._runs, this._filter.value);
    const signature = JSON.stringify([
      shown,
      this._error,
      this._sizeBytes,
      this._loaded,
      shown.map(r => fmtWhen(r.created, now))
    ]);
    if (!force && signature === this._signature) {
      return;
    }
    this._signature = signature;
    this._updateCompareButton();

    clear(this._status);
    this._status.classList.toggle('jp-TorchProf-runError', this._error !== null);
    if (this._error !== null) {
      this._status.textContent = `Cannot list runs: ${this._error}`;
    } else if (this._loaded) {
      const count = this._runs.length === 1 ? '1 run' : `${this._runs.length} runs`;
      const filtered = shown.length !== this._runs.length ? ` (${shown.length} shown)` : '';
      this._status.textContent = `${count}${filtered} · ${fmtBytes(this._sizeBytes)}`;
      this._status.title = this._root;
    }

    clear(this._list);
    if (this._loaded && this._error === null && this._runs.length === 0) {
      const empty = el('li', 'jp-TorchProf-runEmpty');
      empty.textContent = 'No runs yet. Run a cell with %%torchprof and it appears here.';
      this._list.appendChild(empty);
      return;
    }
    for (const run of shown) {
      this._list.appendChild(this._row(run, now));
    }
  }

  private _row(run: RunInfo, now: number): HTMLLIElement {
    const li = el('li', 'jp-TorchProf-run');
    li.dataset.runId = run.id;
    li.classList.toggle('jp-TorchProf-damaged', run.damaged);
    li.classList.toggle('jp-TorchProf-running', !!run.running);

    const select = el('input', 'jp-TorchProf-runSelect');
    select.type = 'checkbox';
    select.checked = this._selected.has(run.id);
    select.disabled = run.damaged || !!run.running;
    select.setAttribute('aria-label', `Select ${runName(run)} to compare`);
    select.addEventListener('change', () => {
      if (select.checked) {
        this._selected.add(run.id);
      } else {
        this._selected.delete(run.id);
      }
      this._updateCompareButton();
    });
    li.appendChild(select);

    const main = el('div', 'jp-TorchProf-runMain');
    const name = el('div', 'jp-TorchProf-runName');
    for (const badge of runBadges(run)) {
      const b = el('span', `jp-TorchProf-badge jp-TorchProf-badge-${badge}`, badge);
      if (badge === 'partial') {
        b.title = run.error ?? 'the run was interrupted: only the steps that completed';
      }
      name.appendChild(b);
    }
    name.appendChild(el('span', 'jp-TorchProf-runNameText', shortRunName(run)));
    main.appendChild(name);
    const notebook = notebookName(run);
    if (notebook) {
      main.appendChild(el('div', 'jp-TorchProf-runNotebook', notebook));
    }
    if (run.damaged) {
      main.appendChild(el('div', 'jp-TorchProf-runMeta', run.problem ?? 'damaged'));
      main.title = `${run.id}: ${run.problem ?? 'damaged'}`;
    } else if (run.running) {
      main.appendChild(el('div', 'jp-TorchProf-runMeta', `running… (${fmtWhen(run.created, now)})`));
    } else {
      main.appendChild(el('div', 'jp-TorchProf-runMeta', runMeta(run, now)));
      const top = topOp(run);
      if (top) {
        const line = el('div', 'jp-TorchProf-runTop');
        line.appendChild(el('span', 'jp-TorchProf-runTopLabel', 'top: '));
        line.appendChild(el('span', 'jp-TorchProf-runTopName', top.name));
        line.appendChild(el('span', 'jp-TorchProf-runTopTime', ` ${fmtTime(top.self_us)}`));
        main.appendChild(line);
      }
      const hover = [runName(run), fmtDate(run.created), run.notebook ?? '', run.id, run.cell ?? ''];
      main.title = hover.filter(s => s).join('\n');
      main.tabIndex = 0;
      main.setAttribute('role', 'button');
      main.addEventListener('click', () => this._options.openRun(run.id));
      main.addEventListener('keydown', ev => {
        if (ev.key === 'Enter') {
          this._options.openRun(run.id);
        }
      });
      main.classList.add('jp-TorchProf-openable');
    }
    li.appendChild(main);

    const actions = el('div', 'jp-TorchProf-runActions');
    if (!run.damaged && !run.running) {
      const download = el('a', 'jp-TorchProf-iconButton jp-TorchProf-download');
      download.href = this._api.downloadUrl(run.id);
      download.setAttribute('download', '');
      download.title = 'Download the trace (opens in Perfetto or chrome://tracing)';
      download.setAttribute('aria-label', 'Download trace');
      download.appendChild(downloadIcon.element({ tag: 'span' }));
      actions.appendChild(download);
    }
    if (!run.running) {
      const remove = el('button', 'jp-TorchProf-iconButton jp-TorchProf-delete');
      remove.title = 'Delete this run';
      remove.setAttribute('aria-label', 'Delete run');
      remove.appendChild(deleteIcon.element({ tag: 'span' }));
      remove.addEventListener('click', () => void this._delete(run));
      actions.appendChild(remove);
    }
    li.appendChild(actions);
    return li;
  }
}
