/**
 * hive-lab for JupyterLab: the "GPU cluster" sidebar panel, the topology heatmap, a status bar
 * item, command palette entries and settings, all fed by one ClusterModel.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  IThemeManager,
  MainAreaWidget,
  WidgetTracker
} from '@jupyterlab/apputils';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { HiveApi, IJob } from './api';
import { HeatmapWidget } from './heatmap';
import { KernelNotices } from './kernelnotices';
import { ClusterModel, IHiveSettings } from './model';
import { ClusterPanel } from './panel';
import { ClusterStatus } from './statusbar';
import { announceJobEnds } from './jobnotices';
import { viewRendererFactory } from './notebookviews';
import { notebookOpener } from './outputs';
import { submitCurrentNotebook } from './submit';
import gpuSvg from '../style/icons/gpu.svg';

const PLUGIN_ID = 'hive-lab:plugin';

export namespace CommandIDs {
  export const openPanel = 'hive-lab:open-panel';
  export const openHeatmap = 'hive-lab:open-heatmap';
  export const submitNotebook = 'hive-lab:submit-notebook';
}

export const gpuIcon = new LabIcon({ name: 'hive-lab:gpu', svgstr: gpuSvg });

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'GPU cluster panel, topology heatmap and status bar for hive-lab.',
  autoStart: true,
  optional: [ICommandPalette, ISettingRegistry, IStatusBar, ILayoutRestorer, IThemeManager, IRenderMimeRegistry],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    restorer: ILayoutRestorer | null,
    themes: IThemeManager | null,
    rendermime: IRenderMimeRegistry | null
  ) => {
    const model = new ClusterModel(new HiveApi(app.serviceManager.serverSettings));
    const { commands, shell } = app;

    const heatmaps = new WidgetTracker<MainAreaWidget<HeatmapWidget>>({
      namespace: 'hive-lab-heatmap'
    });
    const openHeatmap = () => void commands.execute(CommandIDs.openHeatmap);

    // the log viewer is a main-area tab: log lines need the width the sidebar lacks
    const placeLogs = (widget: Widget) => {
      if (!widget.isAttached) {
        shell.add(widget, 'main');
      }
      shell.activateById(widget.id);
    };
    const panel = new ClusterPanel(model, openHeatmap, notebookOpener(app, model), placeLogs);
    panel.title.icon = gpuIcon;
    shell.add(panel, 'left', { rank: 600 });
    const showLogs = (job: IJob) => {
      shell.activateById(panel.id);
      panel.showLogs(job);
    };
    announceJobEnds(model, showLogs);
    // %hive_jobs / %hive_status outputs: drawn here, live, whatever became of the kernel that made them
    rendermime?.addFactory(viewRendererFactory(model, showLogs));
    restorer?.add(panel, 'hive-lab-panel');

    commands.addCommand(CommandIDs.openPanel, {
      label: 'GPU cluster: open panel',
      caption: 'Show jobs, queues and VC usage',
      icon: gpuIcon,
      execute: () => shell.activateById(panel.id)
    });

    commands.addCommand(CommandIDs.openHeatmap, {
      label: 'GPU cluster: open topology heatmap',
      caption: 'Every GPU as a cell, grouped by rack, node and switch',
      icon: gpuIcon,
      execute: () => {
        performance.mark('hive-heatmap:open');
        let widget = heatmaps.currentWidget;
        if (!widget || widget.isDisposed) {
          const content = new HeatmapWidget(model);
          widget = new MainAreaWidget<HeatmapWidget>({ content });
          widget.id = 'hive-lab-heatmap-area';
          widget.title.label = 'GPU heatmap';
          widget.title.icon = gpuIcon;
          void heatmaps.add(widget);
        }
        if (!widget.isAttached) {
          shell.add(widget, 'main');
        }
        shell.activateById(widget.id);
        return widget;
      }
    });
    restorer?.restore(heatmaps, {
      command: CommandIDs.openHeatmap,
      name: () => 'hive-lab-heatmap'
    });

    commands.addCommand(CommandIDs.submitNotebook, {
      label: 'GPU cluster: submit current notebook as a job',
      caption: 'Run the notebook with nbconvert --execute on cluster GPUs',
      icon: gpuIcon,
      execute: () => submitCurrentNotebook(app, model, showLogs)
    });

    if (palette) {
      const category = 'GPU cluster';
      for (const command of [
        CommandIDs.openPanel,
        CommandIDs.openHeatmap,
        CommandIDs.submitNotebook
      ]) {
        palette.addItem({ command, category });
      }
    }

    if (statusBar) {
      const status = new ClusterStatus(model, () =>
        void commands.execute(CommandIDs.openPanel)
      );
      statusBar.registerStatusItem('hive-lab:status', {
        item: status,
        align: 'left',
        rank: 50
      });
    }

    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = () =>
            model.updateSettings(settings.composite as unknown as Partial<IHiveSettings>);
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => console.warn('hive-lab: settings not loaded', reason));
    }

    // The canvas reads theme colours when it paints: repaint after a theme switch.
    themes?.themeChanged.connect(() => {
      window.setTimeout(() => heatmaps.forEach(w => w.content.render()), 200);
    });

    // queued, culled and preempted GPU kernels: said where the person looks, with a way to the notebook
    new KernelNotices(model, label => {
      for (const widget of shell.widgets('main')) {
        const path: string | undefined = (widget as any).context?.path;
        if (path && (path === label || path.split('/').pop() === label)) {
          return () => shell.activateById(widget.id);
        }
      }
      return null;
    });
    model.start();
  }
};

export default plugin;
