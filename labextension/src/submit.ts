/**
 * "Submit the current notebook as a job": saves the notebook, asks for VC and GPUs, then
 * POSTs a batch job that stages the notebook and runs it with nbconvert --execute.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, Notification, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { Widget } from '@lumino/widgets';

import { IJob } from './api';
import { FINAL_STATES } from './jobStates';
import { announcedElsewhere } from './jobnotices';
import { ClusterModel } from './model';
import { notify, notifyUpdate } from './notify';
import { notebookOpener } from './outputs';

interface IDocumentLike {
  context?: { path: string; save: () => Promise<void> };
}

/** The path of the notebook in the main area, or null. */
export function currentNotebookPath(app: JupyterFrontEnd): string | null {
  const widget = app.shell.currentWidget as unknown as IDocumentLike | null;
  const path = widget?.context?.path;
  return path && path.endsWith('.ipynb') ? path : null;
}

/**
 * The batch-job spec that runs a notebook staged into the job's working dir: the server runs it with
 * papermill, `parameters` injected after its cell tagged `parameters`, and keeps the executed copy
 * (`<name>.executed.ipynb`) as an output of the job.
 */
export function notebookJobSpec(
  notebookPath: string,
  notebookText: string,
  vc: string,
  gpus: number,
  parameters: Record<string, unknown> = {}
): Record<string, unknown> {
  const file = PathExt.basename(notebookPath);
  return {
    name: file.replace(/\.ipynb$/, ''),
    vc,
    kind: 'batch',
    notebook: { file, parameters },
    tasks: [{ name: 'main', count: 1, gpus }],
    files: { [file]: notebookText }
  };
}

/** `lr=0.1` lines -> {lr: 0.1}: a value is JSON when it parses as JSON, else the string it is. */
export function parseParameters(text: string): Record<string, unknown> {
  const parameters: Record<string, unknown> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) {
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) {
      throw new Error(`a parameter is NAME=VALUE, e.g. lr=0.1; got "${line}"`);
    }
    const value = line.slice(eq + 1).trim();
    try {
      parameters[line.slice(0, eq).trim()] = JSON.parse(value);
    } catch {
      parameters[line.slice(0, eq).trim()] = value;
    }
  }
  return parameters;
}

class SubmitForm extends Widget {
  constructor(vcs: string[], name: string) {
    super();
    this.addClass('jp-HiveSubmit');
    const info = document.createElement('p');
    info.textContent = `Runs ${name} as a batch job (papermill); the executed copy (${name.replace(/\.ipynb$/, '')}.executed.ipynb) becomes an output of the job, which the log viewer opens in Lab.`;
    this.vc = document.createElement('select');
    this.vc.className = 'jp-mod-styled';
    for (const vc of vcs) {
      const option = document.createElement('option');
      option.value = vc;
      option.textContent = vc;
      this.vc.appendChild(option);
    }
    this.gpus = document.createElement('input');
    this.gpus.type = 'number';
    this.gpus.min = '0';
    this.gpus.value = '1';
    this.gpus.className = 'jp-mod-styled';
    const vcLabel = document.createElement('label');
    vcLabel.append('Virtual cluster ', this.vc);
    const gpuLabel = document.createElement('label');
    gpuLabel.append('GPUs ', this.gpus);
    this.parameters = document.createElement('textarea');
    this.parameters.className = 'jp-mod-styled jp-HiveSubmit-parameters';
    this.parameters.rows = 3;
    this.parameters.placeholder = 'lr=0.01\nepochs=3';
    const parametersLabel = document.createElement('label');
    parametersLabel.append(
      "Parameters (NAME=VALUE per line, set after the cell tagged 'parameters') ",
      this.parameters
    );
    this.node.append(info, vcLabel, gpuLabel, parametersLabel);
  }

  getValue(): { vc: string; gpus: number; parameters: string } {
    return { vc: this.vc.value, gpus: Number(this.gpus.value), parameters: this.parameters.value };
  }

  readonly parameters: HTMLTextAreaElement;

  readonly vc: HTMLSelectElement;
  readonly gpus: HTMLInputElement;
}

export async function submitCurrentNotebook(
  app: JupyterFrontEnd,
  model: ClusterModel,
  showLog?: (job: IJob) => void
): Promise<IJob | null> {
  const path = currentNotebookPath(app);
  if (!path) {
    await showErrorMessage('No notebook', 'Open a notebook in the main area, then submit it.');
    return null;
  }
  const widget = app.shell.currentWidget as unknown as IDocumentLike;
  await widget.context?.save();
  const me = model.me ?? (await model.api.me());
  const form = new SubmitForm(me.vcs, PathExt.basename(path));
  const answer = await showDialog({
    title: 'Submit notebook as a GPU job',
    body: form,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Submit' })]
  });
  if (!answer.button.accept || !answer.value) {
    return null;
  }
  try {
    const model_ = await app.serviceManager.contents.get(path, { content: true });
    const text = JSON.stringify(model_.content);
    const job = await model.api.submit(
      notebookJobSpec(
        path,
        text,
        answer.value.vc,
        answer.value.gpus,
        parseParameters(answer.value.parameters)
      )
    );
    void model.refresh();
    announceWhenDone(model, job, notebookOpener(app, model), showLog);
    return job;
  } catch (error) {
    await showErrorMessage('Could not submit the notebook', (error as Error).message);
    return null;
  }
}

/**
 * A toast once the notebook job has ended: done, with an Open button (its executed notebook, copied
 * into your files) and Show log; or why it failed, with Show log. Short message, the actions as buttons
 * (a toast cuts a message beyond 140 characters, notify.ts).
 */
export function announceWhenDone(
  model: ClusterModel,
  submitted: IJob,
  open?: (job: IJob, path: string) => Promise<unknown>,
  showLog?: (job: IJob) => void
): void {
  announcedElsewhere.add(submitted.id); // this toast says it; no second one from jobnotices.ts
  const waiting = notify(`${submitted.name}: submitted as ${submitted.id}`, 'in-progress', {
    autoClose: false
  });
  const onJob = (_: ClusterModel, job: IJob) => {
    if (job.id !== submitted.id || !FINAL_STATES.has(job.state)) {
      return;
    }
    model.jobEvent.disconnect(onJob);
    const ok = job.state === 'succeeded';
    const executed = `${submitted.name}.executed.ipynb`;
    const actions: Notification.IAction[] = [];
    if (ok && open) {
      actions.push({
        label: 'Open',
        caption: `Open ${executed} (copied into hive-outputs/${job.id}/ in your files)`,
        displayType: 'accent',
        callback: () => {
          open(job, executed).catch(error =>
            notify(`Could not open ${executed}: ${(error as Error).message}`, 'error', { autoClose: false })
          );
        }
      });
    }
    if (showLog) {
      actions.push({ label: 'Show log', caption: `Show the log of ${job.id}`, callback: () => showLog(job) });
    }
    notifyUpdate(
      waiting,
      ok
        ? `${submitted.name} (${job.id}) is done: ${executed} is ready`
        : `${submitted.name} (${job.id}) ${job.state}${job.reason ? `: ${job.reason}` : ''}`,
      ok ? 'success' : 'error',
      { autoClose: false, actions }
    );
  };
  model.jobEvent.connect(onJob);
}
