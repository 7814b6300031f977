/**
 * The base of the widgets that show one notebook's Session: they hold a SessionModel (or none) and
 * render again whenever it changes.
 */

import { Widget } from '@lumino/widgets';

import { SessionModel } from './model';

export abstract class SessionView extends Widget {
  /** The model shown, or null for none (a notebook whose kernel has not spoken). */
  get model(): SessionModel | null {
    return this._model;
  }

  set model(model: SessionModel | null) {
    if (model === this._model) {
      return;
    }
    this._model?.changed.disconnect(this.render, this);
    this._model = model;
    model?.changed.connect(this.render, this);
    this.render();
  }

  /** Bring the DOM up to date with the model. */
  abstract render(): void;

  protected _model: SessionModel | null = null;
}
