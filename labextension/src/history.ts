/**
 * The side panel: the iteration history of the current notebook's Session, one row per verified
 * `%%gpucompile` cell (name, mode, verdict, ε, time), updated live from `verdict` messages.
 */

import { LabIcon } from '@jupyterlab/ui-components';

import { SessionView } from './view';
import {
  IVerdict,
  formatCounterexample,
  formatEpsilon,
  formatSeconds,
  outcome,
  totalSeconds
} from './protocol';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M3 4h18v2H3zm0 5h12v2H3zm0 5h18v2H3zm0 5h12v2H3z"/>
    <path d="M18.2 8.1l1.4 1.4-3.9 3.9-2.3-2.3 1.4-1.4.9.9z"/>
  </g>
</svg>`;

export const historyIcon = new LabIcon({ name: 'jupyter-gpuiter:history', svgstr: ICON_SVG });

// the mode goes under the cell's name: the left sidebar is narrow
const COLUMNS = ['cell · mode', 'verdict', 'ε', 'time'];

export class HistoryPanel extends SessionView {
  constructor() {
    super();
    this.id = 'jp-gpuiter-history';
    this.addClass('jp-gpuiter-history');
    this.title.icon = historyIcon;
    this.title.caption = 'gpuiter: iteration history';
    const header = document.createElement('div');
    header.className = 'jp-gpuiter-history-header';
    header.textContent = 'gpuiter iterations';
    this._summary = document.createElement('div');
    this._summary.className = 'jp-gpuiter-history-summary';
    this._table = document.createElement('table');
    this._table.className = 'jp-gpuiter-history-table';
    const head = this._table.createTHead().insertRow();
    for (const c of COLUMNS) {
      const th = document.createElement('th');
      th.textContent = c;
      head.appendChild(th);
    }
    this._body = this._table.createTBody();
    this.node.append(header, this._summary, this._table);
    this.render();
  }

  render(): void {
    const history = this._model?.history ?? [];
    const status = this._model?.status ?? null;
    this._summary.textContent =
      this._model === null
        ? 'Open a notebook and run a %%gpucompile cell.'
        : history.length === 0
          ? 'No verified cell yet.'
          : `${history.length} cell${history.length === 1 ? '' : 's'}` +
            (status ? ` · Session on ${status.device}, ${status.cached_kernels} cached kernels` : '');
    // rebuilt whole: a few hundred rows at most, and only when a message arrives
    this._body.replaceChildren(...history.map((v, i) => this._row(v, i + 1)));
  }

  private _row(v: IVerdict, n: number): HTMLTableRowElement {
    const row = document.createElement('tr');
    const result = outcome(v);
    row.className = 'jp-gpuiter-history-row';
    row.dataset.verdict = result;
    row.dataset.n = String(n);
    row.dataset.name = v.name;
    row.dataset.mode = v.mode;
    const cell = (cls: string, ...children: (string | HTMLElement)[]) => {
      const td = row.insertCell();
      td.className = `jp-gpuiter-col-${cls}`;
      td.append(...children);
      return td;
    };
    const span = (cls: string, text: string) => {
      const s = document.createElement('span');
      s.className = cls;
      s.textContent = text;
      return s;
    };
    cell('name', span('jp-gpuiter-history-name', v.name), span('jp-gpuiter-history-mode', v.mode));
    cell('verdict', result);
    cell('eps', formatEpsilon(v));
    cell('time', formatSeconds(totalSeconds(v)));
    const lines = [v.error ? `${v.error.kind} at line ${v.error.line}, column ${v.error.col}: ${v.error.message}` : v.sentence];
    if (v.counterexample) {
      lines.push(formatCounterexample(v.counterexample));
    }
    if (v.at) {
      lines.push(`at ${new Date(v.at * 1000).toLocaleTimeString()}`);
    }
    row.title = lines.join('\n');
    return row;
  }

  private _summary: HTMLDivElement;
  private _table: HTMLTableElement;
  private _body: HTMLTableSectionElement;
}
