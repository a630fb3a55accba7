/**
 * Main-area panels: one run (summary, sortable op / kernel / step tables,
 * timeline) and the comparison of two runs (headline, op and kernel diffs).
 *
 * Both are built from the server's REST replies only, so they open without
 * the kernel that made the run, and restore after a page reload.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { ApiError, RunsApi } from './api';
import { ensureBokeh } from './bokeh';
import { clear, definitionList, el } from './dom';
import { fmtCount, fmtDate, fmtPct, fmtTime } from './format';
import { torchprofIcon } from './icons';
import {
  Comparison,
  findingsOf,
  RunInfo,
  runName,
  RunTables,
  Summary
} from './runs';
import { section, tableSection } from './table';

function errorText(err: unknown): string {
  if (err instanceof ApiError && err.status === 404) {
    return `${err.message} — the run may have been deleted.`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Label → value pairs of a summary, for the panel's header. */
export function summaryPairs(summary: Summary): [string, string][] {
  const pairs: [string, string][] = [
    ['Device', summary.device ?? '–'],
    ['Steps', fmtCount(summary.steps ?? null)],
    ['Wall / step', fmtTime(summary.wall_per_step_us ?? null)],
    ['CPU busy / step', fmtTime(summary.cpu_busy_per_step_us ?? null)]
  ];
  if (summary.device_traced) {
    const pct = summary.device_busy_pct;
    const busy = fmtTime(summary.device_busy_per_step_us ?? null);
    pairs.push(['Device busy / step', pct === null || pct === undefined ? busy : `${busy} (${fmtPct(pct)})`]);
    pairs.push(['Kernels', fmtCount(summary.kernels ?? null)]);
  } else {
    pairs.push(['Device busy / step', 'not traced']);
  }
  pairs.push(['Events', fmtCount(summary.events ?? null)]);
  if (summary.world_size !== undefined && summary.world_size !== null && summary.world_size > 1) {
    pairs.push(['Rank', `${summary.rank ?? '?'} of ${summary.world_size}`]);
  }
  return pairs;
}

/** One run: summary, tables and timeline. */
export class RunView extends Widget {
  readonly runId: string;
  private _trace: number;
  private readonly _api: RunsApi;
  private _bokehViews: any[] = [];
  private _generation = 0;

  constructor(api: RunsApi, runId: string, trace = 0) {
    super();
    this._api = api;
    this.runId = runId;
    this._trace = trace;
    this.addClass('jp-TorchProf-runView');
    void this.load();
  }

  /** Index of the trace shown (runs loaded from a folder hold several). */
  get trace(): number {
    return this._trace;
  }

  /** Fetch the tables and draw the panel. */
  async load(): Promise<void> {
    const generation = ++this._generation;
    this._removeBokeh();
    clear(this.node);
    this.node.appendChild(el('p', 'jp-TorchProf-runMuted', 'Computing the tables…'));
    let data: RunTables;
    try {
      data = await this._api.tables(this.runId, this._trace);
    } catch (err) {
      if (generation === this._generation) {
        clear(this.node);
        this.node.appendChild(el('p', 'jp-TorchProf-runError', `Cannot open run ${this.runId}: ${errorText(err)}`));
      }
      return;
    }
    if (generation !== this._generation || this.isDisposed) {
      return;
    }
    this._draw(data);
  }

  private _draw(data: RunTables): void {
    const info = data.info;
    const name = runName(info);
    // Tabs of runs and of comparisons would both start with the cell's first
    // characters: say which kind of tab it is first.
    this.title.label = `Run: ${name}`;
    this.title.caption = `${name}\n${info.id}`;
    clear(this.node);

    const header = el('header', 'jp-TorchProf-runHeader');
    header.appendChild(el('h2', 'jp-TorchProf-runTitle', name));
    const made =
      info.kind === 'load'
        ? `loaded ${fmtDate(info.created)}${info.source ? ` from ${info.source}` : ''}`
        : `captured ${fmtDate(info.created)}${info.notebook ? ` in ${info.notebook}` : ''}`;
    header.appendChild(el('div', 'jp-TorchProf-runSubtitle', `${made} · ${info.id}`));
    if (info.device_files && info.device_files.length > 0) {
      header.appendChild(
        el('div', 'jp-TorchProf-runSubtitle jp-TorchProf-deviceFiles', `device traces: ${info.device_files.join(', ')}`)
      );
    }

    const actions = el('div', 'jp-TorchProf-runPanelActions');
    if (data.traces.length > 1) {
      const pick = el('select', 'jp-TorchProf-traceSelect jp-mod-styled');
      pick.setAttribute('aria-label', 'Trace shown');
      data.traces.forEach((t, i) => {
        const opt = el('option', '', t);
        opt.value = String(i);
        opt.selected = i === this._trace;
        pick.appendChild(opt);
      });
      pick.addEventListener('change', () => {
        this._trace = Number(pick.value);
        void this.load();
      });
      actions.appendChild(pick);
    }
    const download = el('a', 'jp-TorchProf-runButton jp-TorchProf-download', 'Download trace');
    download.href = this._api.downloadUrl(this.runId, this._trace);
    download.setAttribute('download', '');
    download.title = `${data.trace} (opens in Perfetto or chrome://tracing)`;
    actions.appendChild(download);
    const reload = el('button', 'jp-TorchProf-runButton jp-TorchProf-reload', 'Reload');
    reload.addEventListener('click', () => void this.load());
    actions.appendChild(reload);
    header.appendChild(actions);
    this.node.appendChild(header);

    const summary = data.summary;
    const device = !!summary.device_traced;
    this.node.appendChild(definitionList(summaryPairs(summary), 'jp-TorchProf-runSummary'));
    if (summary.error) {
      this.node.appendChild(el('p', 'jp-TorchProf-runError', summary.error));
    }
    for (const note of summary.notes ?? []) {
      this.node.appendChild(el('p', 'jp-TorchProf-runNote', `note: ${note}`));
    }
    const findings = findingsOf(data.findings);
    if (findings.length > 0) {
      const box = section('Findings', 'jp-TorchProf-runFindings');
      for (const f of findings) {
        const item = el('details', `jp-TorchProf-runFinding jp-TorchProf-sev-${f.severity.replace(/\s+/g, '-')}`);
        const head = el('summary', '');
        head.appendChild(el('span', 'jp-TorchProf-runFindingSeverity', f.severity));
        head.appendChild(el('span', 'jp-TorchProf-runFindingTitle', ` ${f.title}`));
        item.appendChild(head);
        const at = f.impactUs !== null && f.impactUs > 0 ? ` (${fmtTime(f.impactUs)} per step at stake)` : '';
        item.appendChild(el('p', 'jp-TorchProf-runFindingDetail', `${f.detail}${at}`));
        box.appendChild(item);
      }
      this.node.appendChild(box);
    }
    if (info.cell) {
      const details = el('details', 'jp-TorchProf-runCell');
      details.appendChild(el('summary', '', 'Cell'));
      details.appendChild(el('pre', '', info.cell));
      this.node.appendChild(details);
    }

    this.node.appendChild(tableSection('Ops', 'jp-TorchProf-ops', data.ops, device, 'ops', 'name'));
    if (device || data.kernels.rows.length > 0) {
      this.node.appendChild(
        tableSection('Kernels', 'jp-TorchProf-kernels', data.kernels, true, 'kernels', 'name')
      );
    }
    this.node.appendChild(
      tableSection('Steps', 'jp-TorchProf-steps', data.steps, device, 'profiler steps')
    );
    if (data.memory && data.memory.rows.length > 0) {
      this.node.appendChild(
        tableSection('Memory', 'jp-TorchProf-runMemory', data.memory, true, 'memory devices')
      );
    }
    const timeline = section('Timeline', 'jp-TorchProf-runTimelineSection');
    const target = el('div', 'jp-TorchProf-runTimeline');
    timeline.appendChild(target);
    this.node.appendChild(timeline);
    if (data.timeline) {
      void this._drawTimeline(target);
    } else {
      target.appendChild(
        el('p', 'jp-TorchProf-runMuted', 'The timeline view is not available in this version of jupyter_torchprof.')
      );
    }
  }

  private async _drawTimeline(target: HTMLElement): Promise<void> {
    const generation = this._generation;
    target.appendChild(el('p', 'jp-TorchProf-runMuted', 'Drawing the timeline…'));
    try {
      const [item] = await Promise.all([this._api.timeline(this.runId, this._trace), ensureBokeh()]);
      if (generation !== this._generation || this.isDisposed) {
        return;
      }
      clear(target);
      const bokeh = (window as any).Bokeh;
      const views = await bokeh.embed.embed_item(item, target);
      this._bokehViews = views && views.roots ? [...views.roots] : [];
    } catch (err) {
      clear(target);
      target.appendChild(el('p', 'jp-TorchProf-runMuted', `No timeline: ${errorText(err)}`));
    }
  }

  private _removeBokeh(): void {
    for (const view of this._bokehViews) {
      try {
        view.remove();
      } catch {
        // already gone with its element
      }
    }
    this._bokehViews = [];
  }

  dispose(): void {
    this._removeBokeh();
    super.dispose();
  }
}

function runLine(label: string, run: RunInfo): HTMLElement {
  const line = el('div', 'jp-TorchProf-diffRun');
  line.appendChild(el('span', 'jp-TorchProf-diffLabel', `${label}: `));
  line.appendChild(el('span', 'jp-TorchProf-diffName', runName(run)));
  const meta = [fmtDate(run.created), run.device ?? '', run.id].filter(s => s).join(' · ');
  line.appendChild(el('span', 'jp-TorchProf-runMuted', ` (${meta})`));
  return line;
}

/** Two runs compared: headline, op and kernel diffs (times per step). */
export class DiffView extends Widget {
  readonly a: string;
  readonly b: string;
  private readonly _api: RunsApi;

  constructor(api: RunsApi, a: string, b: string) {
    super();
    this._api = api;
    this.a = a;
    this.b = b;
    this.addClass('jp-TorchProf-diffView');
    void this.load();
  }

  /** Fetch the comparison and draw it. */
  async load(): Promise<void> {
    clear(this.node);
    this.node.appendChild(el('p', 'jp-TorchProf-runMuted', 'Comparing…'));
    let data: Comparison;
    try {
      data = await this._api.compare(this.a, this.b);
    } catch (err) {
      clear(this.node);
      this.node.appendChild(el('p', 'jp-TorchProf-runError', `Cannot compare: ${errorText(err)}`));
      return;
    }
    if (this.isDisposed) {
      return;
    }
    const [la, lb] = data.labels;
    this.title.label = `Compare: ${la} → ${lb}`;
    this.title.caption = `compare ${data.a.id} → ${data.b.id}`;
    clear(this.node);
    const header = el('header', 'jp-TorchProf-runHeader');
    header.appendChild(el('h2', 'jp-TorchProf-runTitle', 'Compare runs'));
    header.appendChild(runLine('A (baseline)', data.a));
    header.appendChild(runLine('B', data.b));
    this.node.appendChild(header);
    for (const note of data.notes ?? []) {
      this.node.appendChild(el('p', 'jp-TorchProf-runNote', note));
    }
    const device = !!(data.summary_a.device_traced || data.summary_b.device_traced);
    this.node.appendChild(
      tableSection('Per step', 'jp-TorchProf-headline', data.headline, device, 'numbers')
    );
    this.node.appendChild(
      tableSection('Ops (per step)', 'jp-TorchProf-opDiff', data.ops, device, 'ops')
    );
    if (data.kernels.rows.length > 0) {
      this.node.appendChild(
        tableSection('Kernels (per step)', 'jp-TorchProf-kernelDiff', data.kernels, true, 'kernels')
      );
    }
  }
}

/** A main-area panel around a view. */
export function panel<T extends Widget>(content: T, id: string, label: string): MainAreaWidget<T> {
  const widget = new MainAreaWidget<T>({ content });
  widget.id = id;
  widget.title.label = label;
  widget.title.icon = torchprofIcon;
  widget.title.closable = true;
  widget.addClass('jp-TorchProf-panel');
  // (MainAreaWidget mirrors the content's title: the tab follows the run's name once loaded)
  return widget;
}
