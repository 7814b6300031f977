/**
 * What the frontend knows about one kernel's Session, fed by the `jupyter_gpuiter` comm; and the
 * tracker that registers the comm target on the kernel of every notebook.
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { IHistory, IStatus, IVerdict, PROTOCOL_VERSION, TARGET, asMessage } from './protocol';

/** Verdicts kept per kernel (the kernel keeps as many for `sync`). */
export const MAX_HISTORY = 1000;

/** The Session of one kernel as its messages describe it. */
export class SessionModel {
  constructor(readonly kernelId: string) {}

  /** The last `status`, or null before the first one. */
  get status(): IStatus | null {
    return this._status;
  }

  /** The verdicts, oldest first. */
  get history(): ReadonlyArray<IVerdict> {
    return this._history;
  }

  /** Emitted after every change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Apply one comm payload; returns whether it was a message of the protocol. */
  handle(data: unknown): boolean {
    const msg = asMessage(data);
    if (msg === null) {
      return false;
    }
    switch (msg.type) {
      case 'status':
        this._status = msg as IStatus;
        break;
      case 'verdict':
        this._history.push(msg as IVerdict);
        if (this._history.length > MAX_HISTORY) {
          this._history.splice(0, this._history.length - MAX_HISTORY);
        }
        break;
      case 'history':
        this._history = ((msg as IHistory).verdicts || []).slice(-MAX_HISTORY);
        break;
    }
    this._changed.emit();
    return true;
  }

  /** Forget everything (the kernel restarted: its Session is new). */
  reset(): void {
    this._status = null;
    this._history = [];
    this._changed.emit();
  }

  private _status: IStatus | null = null;
  private _history: IVerdict[] = [];
  private _changed = new Signal<this, void>(this);
}

/**
 * Registers the `jupyter_gpuiter` comm target on each kernel it is shown, keeps one SessionModel per
 * kernel connection, and tells which model belongs to a notebook's session.
 *
 * The kernel opens the comm the first time it has something to say. A page that connects to a kernel
 * whose comm is already open (a reload, a second tab) attaches to that comm by its id and sends
 * `sync`, to which the kernel answers with the history and the status.
 */
export class SessionTracker {
  /** Emitted when any model changes (the argument is the model). */
  get modelChanged(): ISignal<this, SessionModel> {
    return this._modelChanged;
  }

  /** Follow the kernels of a notebook's session context, for as long as it lives. */
  track(context: ISessionContext): void {
    const attach = () => {
      const kernel = context.session?.kernel;
      if (kernel) {
        this._attach(kernel);
      }
    };
    context.kernelChanged.connect(attach);
    attach();
  }

  /** The model of the kernel a session context is connected to, if any. */
  modelFor(context: ISessionContext | null | undefined): SessionModel | null {
    const kernel = context?.session?.kernel;
    return kernel ? (this._models.get(kernel) ?? null) : null;
  }

  private _attach(kernel: Kernel.IKernelConnection): void {
    if (this._models.has(kernel) || kernel.isDisposed) {
      return;
    }
    const model = new SessionModel(kernel.id);
    this._models.set(kernel, model);
    model.changed.connect(() => this._modelChanged.emit(model));
    kernel.registerCommTarget(TARGET, (comm: Kernel.IComm) => this._listen(model, comm));
    kernel.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting') {
        model.reset();
      }
    });
    kernel.connectionStatusChanged.connect((_, status) => {
      if (status === 'connected') {
        void this._sync(kernel, model);
      }
    });
    kernel.disposed.connect(() => this._models.delete(kernel));
    if (kernel.connectionStatus === 'connected') {
      void this._sync(kernel, model);
    }
  }

  private _listen(model: SessionModel, comm: Kernel.IComm): void {
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      model.handle(msg.content.data);
    };
  }

  /** Attach to comms the kernel opened before this page listened, and ask them for the history. */
  private async _sync(kernel: Kernel.IKernelConnection, model: SessionModel): Promise<void> {
    let reply: KernelMessage.ICommInfoReplyMsg;
    try {
      reply = await kernel.requestCommInfo({ target_name: TARGET });
    } catch {
      return; // the kernel went away meanwhile
    }
    const content = reply.content;
    if (content.status !== 'ok') {
      return;
    }
    for (const [id, info] of Object.entries(content.comms)) {
      if (info.target_name !== TARGET || kernel.isDisposed || kernel.hasComm(id)) {
        continue;
      }
      const comm = kernel.createComm(TARGET, id);
      this._listen(model, comm);
      comm.send({ type: 'sync', version: PROTOCOL_VERSION });
    }
  }

  private _models = new Map<Kernel.IKernelConnection, SessionModel>();
  private _modelChanged = new Signal<this, SessionModel>(this);
}
