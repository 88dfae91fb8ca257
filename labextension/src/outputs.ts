/**
 * Opening a job's executed notebook in Lab: the output is copied into the user's own files
 * (`hive-outputs/<job id>/<name>.ipynb`) and opened there, so it can be read, rerun and kept.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { PathExt } from '@jupyterlab/coreutils';
import { Contents } from '@jupyterlab/services';

import { IJob } from './api';
import { ClusterModel } from './model';

export const OUTPUTS_DIR = 'hive-outputs';

async function ensureDirectory(contents: Contents.IManager, path: string): Promise<void> {
  try {
    await contents.get(path, { content: false });
  } catch {
    await contents.save(path, { type: 'directory' });
  }
}

/** Where a job's output notebook lands in the user's files. */
export function localCopyPath(jobId: string, outputPath: string): string {
  return `${OUTPUTS_DIR}/${jobId}/${PathExt.basename(outputPath)}`;
}

/** A function for the log viewer: copy `path` (an .ipynb output of `job`) into Lab and open it. */
export function notebookOpener(
  app: JupyterFrontEnd,
  model: ClusterModel
): (job: IJob, path: string) => Promise<string> {
  return async (job: IJob, path: string) => {
    const content = await model.api.request<unknown>(
      `jobs/${encodeURIComponent(job.id)}/outputs/${path.split('/').map(encodeURIComponent).join('/')}`
    );
    const contents = app.serviceManager.contents;
    await ensureDirectory(contents, OUTPUTS_DIR);
    await ensureDirectory(contents, `${OUTPUTS_DIR}/${job.id}`);
    const target = localCopyPath(job.id, path);
    await contents.save(target, { type: 'notebook', format: 'json', content });
    await app.commands.execute('docmanager:open', { path: target });
    return target;
  };
}
