/**
 * The status-bar item: the current notebook's Session (device, cached kernels) and its last verdict
 * with the confidence sentence. Hidden until that kernel has sent a `status`.
 */

import { SessionView } from './view';

export class SessionStatus extends SessionView {
  constructor() {
    super();
    this.addClass('jp-gpuiter-status');
    this.node.title = 'gpuiter: the Session of this notebook (click for the iteration history)';
    this._device = this._span('jp-gpuiter-status-device');
    this._kernels = this._span('jp-gpuiter-status-kernels');
    this._verdict = this._span('jp-gpuiter-status-verdict');
    this._sentence = this._span('jp-gpuiter-status-sentence');
  }

  /** Whether there is anything to show. */
  get hasContent(): boolean {
    return this._model?.status != null;
  }

  render(): void {
    const status = this._model?.status ?? null;
    if (status === null) {
      this.node.dataset.verdict = '';
      for (const span of [this._device, this._kernels, this._verdict, this._sentence]) {
        span.textContent = '';
      }
      return;
    }
    const n = status.cached_kernels;
    this._device.textContent = `gpuiter ${status.device}`;
    this._kernels.textContent = `${n} cached kernel${n === 1 ? '' : 's'}`;
    const last = status.last;
    if (last === null) {
      this._verdict.textContent = 'no verdict yet';
      this._sentence.textContent = '';
      this.node.dataset.verdict = '';
    } else {
      const word = last.passed ? 'PASS' : 'FAIL';
      this._verdict.textContent = `${last.name} ${word}`;
      this._sentence.textContent = last.sentence;
      this.node.dataset.verdict = word;
    }
    this.node.title =
      `gpuiter Session on ${status.device}: ${n} cached kernels, ${status.iterations} iterations` +
      (last ? `\nlast: ${last.name} ${last.passed ? 'PASS' : 'FAIL'}: ${last.sentence}` : '') +
      '\n(click for the iteration history)';
  }

  private _span(cls: string): HTMLSpanElement {
    const span = document.createElement('span');
    span.className = cls;
    this.node.appendChild(span);
    return span;
  }

  private _device: HTMLSpanElement;
  private _kernels: HTMLSpanElement;
  private _verdict: HTMLSpanElement;
  private _sentence: HTMLSpanElement;
}
