/**
 * jupyter-gpuiter: the JupyterLab front end of jupyter_gpuiter.
 *
 * - a status-bar item with the current notebook's Session (device, cached kernels, last verdict and
 *   its confidence sentence);
 * - a side panel with the iteration history (cell, mode, verdict, ε, time), updated live;
 * - commands: insert and run a trade-off explorer cell (`%gpuiter tradeoffs`), show the history.
 *
 * Everything is fed by the `jupyter_gpuiter` comm that the kernel opens (docs/protocol.md).
 */

import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Signal } from '@lumino/signaling';

import { HistoryPanel } from './history';
import { SessionTracker } from './model';
import { SessionStatus } from './status';

export const PLUGIN_ID = 'jupyter-gpuiter:plugin';
export const TRADEOFFS_SOURCE = '%gpuiter tradeoffs';

export namespace CommandIDs {
  export const insertTradeoffs = 'gpuiter:insert-tradeoffs';
  export const showHistory = 'gpuiter:show-history';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'The gpuiter Session in the status bar, the iteration history panel, the trade-off explorer command.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar, ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const sessions = new SessionTracker();
    const history = new HistoryPanel();
    const status = new SessionStatus();
    const statusActive = new Signal<SessionStatus, void>(status);

    // Show the model of the current notebook's kernel, whichever changed: the notebook, its kernel, a model.
    const update = () => {
      const model = sessions.modelFor(notebooks.currentWidget?.sessionContext);
      history.model = model;
      status.model = model;
      statusActive.emit();
    };
    notebooks.widgetAdded.connect((_, panel) => {
      sessions.track(panel.sessionContext);
      panel.sessionContext.kernelChanged.connect(update);
    });
    notebooks.forEach(panel => {
      sessions.track(panel.sessionContext);
      panel.sessionContext.kernelChanged.connect(update);
    });
    notebooks.currentChanged.connect(update);
    sessions.modelChanged.connect(() => {
      if (status.model === null || history.model === null) {
        update();
      } else {
        statusActive.emit();
      }
    });

    app.shell.add(history, 'left', { rank: 900 });
    restorer?.add(history, history.id);

    app.commands.addCommand(CommandIDs.showHistory, {
      label: 'Show gpuiter Iteration History',
      caption: 'The verified %%gpucompile cells of the current notebook',
      execute: () => app.shell.activateById(history.id)
    });

    app.commands.addCommand(CommandIDs.insertTradeoffs, {
      label: 'Insert gpuiter Trade-off Explorer',
      caption: `Insert a cell with ${TRADEOFFS_SOURCE} below the active cell and run it`,
      isEnabled: () => notebooks.currentWidget !== null,
      execute: async () => {
        const panel = notebooks.currentWidget;
        if (panel === null) {
          return;
        }
        const notebook = panel.content;
        NotebookActions.insertBelow(notebook);
        NotebookActions.changeCellType(notebook, 'code');
        const cell = notebook.activeCell;
        if (cell === null) {
          return;
        }
        cell.model.sharedModel.setSource(TRADEOFFS_SOURCE);
        await NotebookActions.run(notebook, panel.sessionContext);
      }
    });

    if (palette) {
      palette.addItem({ command: CommandIDs.insertTradeoffs, category: 'gpuiter' });
      palette.addItem({ command: CommandIDs.showHistory, category: 'gpuiter' });
    }

    if (statusBar) {
      status.node.addEventListener('click', () => app.shell.activateById(history.id));
      statusBar.registerStatusItem(PLUGIN_ID + ':status', {
        item: status,
        align: 'left',
        rank: 100,
        isActive: () => status.hasContent,
        activeStateChanged: statusActive
      });
    }
    update();
  }
};

export default plugin;
