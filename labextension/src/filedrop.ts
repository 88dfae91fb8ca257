/**
 * Job files dropped on the GPU cluster panel (issue 29): an OpenPAI job (v1 JSON, v2 YAML), an sbatch
 * script, a Kubernetes or Volcano manifest or hive-lab's own spec is sent as it is (`POST jobs` reads
 * its format); a notification says what became of it, with what hive-lab did not apply, or the
 * server's sentence when it refused it.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { notify } from './notify';

import { HiveApiError } from './api';
import { ClusterModel } from './model';

/**
 * Whether a refusal is about the file's container image on a server that runs processes (the local
 * or Slurm launcher): its sentence names `--no-image`, which the drop then offers (issue 40).
 */
export function offersNoImage(error: unknown): boolean {
  return (
    error instanceof HiveApiError &&
    error.status === 400 &&
    /(^|\.)(image|dockerImage)$/.test(error.field ?? '') &&
    error.message.includes('--no-image')
  );
}

/** Ask whether to run the file's commands as processes, its image not applied. */
async function askNoImage(name: string, why: string): Promise<boolean> {
  const answer = await showDialog({
    title: `${name} names a container image`,
    body: `${why}`,
    buttons: [
      Dialog.cancelButton(),
      Dialog.okButton({ label: 'Run as processes (--no-image)' })
    ]
  });
  return answer.button.accept;
}

/** The content type `POST jobs` reads a file of this name as. */
export function contentTypeOf(name: string): string {
  const lower = name.toLowerCase();
  if (lower.endsWith('.json')) {
    return 'application/json';
  }
  if (lower.endsWith('.yaml') || lower.endsWith('.yml')) {
    return 'application/yaml';
  }
  return 'text/plain'; // a script: .sh, .sbatch, .slurm, or none
}

export async function submitDroppedFile(model: ClusterModel, file: File): Promise<void> {
  try {
    const text = await file.text();
    let answer: Awaited<ReturnType<typeof model.api.submitFile>>;
    try {
      answer = await model.api.submitFile(text, contentTypeOf(file.name));
    } catch (error) {
      if (!offersNoImage(error) || !(await askNoImage(file.name, (error as Error).message))) {
        throw error;
      }
      answer = await model.api.submitFile(text, contentTypeOf(file.name), true);
    }
    const source = (answer as any).spec?.source;
    const notes: string[] = source?.not_applied ?? [];
    const what = answer.id.startsWith('a-')
      ? `an array of ${answer.count} jobs (${answer.id})`
      : `job ${answer.id} (${answer.state})`;
    const format = source?.format ? ` as ${source.format}` : '';
    notify(
      `${file.name}: submitted${format}, ${what}` + (notes.length ? `; not applied: ${notes.join('; ')}` : ''),
      notes.length ? 'warning' : 'success',
      { autoClose: notes.length ? false : 8000 }
    );
    void model.refresh();
  } catch (error) {
    notify(`${file.name} was not submitted: ${(error as Error).message}`, 'error', {
      autoClose: false
    });
  }
}

/** Makes `node` take job files dropped on it (highlighted while a file is dragged over it). */
export function acceptJobFiles(node: HTMLElement, model: ClusterModel): void {
  const hasFiles = (event: DragEvent) => Array.from(event.dataTransfer?.types ?? []).includes('Files');
  node.addEventListener('dragover', event => {
    if (hasFiles(event)) {
      event.preventDefault();
      node.classList.add('jp-mod-dropTarget');
    }
  });
  node.addEventListener('dragleave', () => node.classList.remove('jp-mod-dropTarget'));
  node.addEventListener('drop', event => {
    node.classList.remove('jp-mod-dropTarget');
    const files = Array.from(event.dataTransfer?.files ?? []);
    if (files.length === 0) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    for (const file of files) {
      void submitDroppedFile(model, file);
    }
  });
}
