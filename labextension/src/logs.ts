/**
 * Log viewer for one job: reads `jobs/{id}/logs` from an offset and keeps reading while the
 * task runs (follow), appending only the new bytes, auto-scrolling while at the bottom. It opens in
 * the main area (LogsWidget): log lines need the width, the ~210 px sidebar wrapped them per character.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ACTIVE_STATES, IJob } from './api';
import { ClusterModel } from './model';

const FOLLOW_MS = 1000;
const MAX_CHARS = 400_000;

export class LogViewer {
  /** `openNotebook(job, path)`: open an .ipynb output in Lab (outputs.ts); without it, download only. */
  constructor(
    readonly model: ClusterModel,
    private readonly _openNotebook?: (job: IJob, path: string) => Promise<unknown>
  ) {
    this.node = document.createElement('div');
    this.node.className = 'jp-HiveLogs';
    this.node.hidden = true;
    const bar = document.createElement('div');
    bar.className = 'jp-HiveLogs-bar';
    this._title = document.createElement('span');
    this._title.className = 'jp-HiveLogs-title';
    this._tasks = document.createElement('select');
    this._tasks.className = 'jp-HiveLogs-task';
    this._tasks.style.display = 'none';
    this._tasks.onchange = () => this._switchTask(this._tasks.value);
    this._status = document.createElement('span');
    this._status.className = 'jp-HiveLogs-status';
    const close = document.createElement('button');
    close.className = 'jp-HiveLogs-close';
    close.textContent = '×';
    close.title = 'Close the log viewer';
    close.onclick = () => {
      this.close();
      this.closed?.();
    };
    bar.append(this._title, this._tasks, this._status, close);
    this._pre = document.createElement('pre');
    this._pre.className = 'jp-HiveLogs-text';
    this._outputs = document.createElement('ul');
    this._outputs.className = 'jp-HiveLogs-outputs';
    this.node.append(bar, this._pre, this._outputs);
  }

  readonly node: HTMLDivElement;
  /** Told when the viewer shows a job (its tab's label) and when its × is pressed. */
  shown?: (job: IJob) => void;
  closed?: () => void;

  get jobId(): string | null {
    return this._job?.id ?? null;
  }

  show(job: IJob): void {
    this.close();
    this._job = job;
    this._title.textContent = `${job.name || job.id} · ${job.id}`;
    this._title.title = this._title.textContent;
    this.node.hidden = false;
    this.shown?.(job);
    this._switchTask(null);
    void this._showOutputs(this._generation);
  }

  /** The job's output files, each a download link (the browser's session authenticates it). */
  private async _showOutputs(generation: number): Promise<void> {
    const job = this._job;
    if (!job) {
      return;
    }
    let files: { path: string; size: number }[] = [];
    try {
      files = (await this.model.api.request<{ files: { path: string; size: number }[] }>(
        `jobs/${encodeURIComponent(job.id)}/outputs`
      )).files;
    } catch {
      files = [];
    }
    if (generation !== this._generation || this._job?.id !== job.id) {
      return;
    }
    this._outputs.replaceChildren(
      ...files.map(f => {
        const li = document.createElement('li');
        const a = document.createElement('a');
        a.className = 'jp-HiveLogs-output';
        a.href = this.model.api.url(
          `jobs/${encodeURIComponent(job.id)}/outputs/${f.path.split('/').map(encodeURIComponent).join('/')}`
        );
        a.download = f.path.split('/').pop() ?? f.path;
        a.textContent = `${f.path} (${f.size} B)`;
        a.title = 'Download this output file';
        li.appendChild(a);
        if (this._openNotebook && f.path.endsWith('.ipynb')) {
          const open = document.createElement('button');
          open.className = 'jp-HiveLogs-open jp-mod-styled';
          open.textContent = 'Open in Lab';
          open.title = 'Copy this notebook into hive-outputs/ in your files and open it';
          open.onclick = () => {
            this._openNotebook?.(job, f.path).catch(error => {
              open.textContent = `Could not open: ${(error as Error).message}`;
            });
          };
          li.appendChild(open);
        }
        return li;
      })
    );
    this._outputs.hidden = files.length === 0;
  }

  close(): void {
    window.clearTimeout(this._timer);
    this._generation += 1;
    this._job = null;
    this.node.hidden = true;
  }

  dispose(): void {
    this.close();
  }

  private _switchTask(task: string | null): void {
    window.clearTimeout(this._timer);
    this._generation += 1;
    this._task = task;
    this._offset = 0;
    this._pre.textContent = '';
    void this._poll(this._generation);
  }

  private _currentState(): string {
    const id = this._job?.id;
    const known =
      this.model.myJobs.find(j => j.id === id) ?? this.model.allJobs.find(j => j.id === id);
    return known?.state ?? this._job?.state ?? 'unknown';
  }

  private async _poll(generation: number): Promise<void> {
    const job = this._job;
    if (!job || generation !== this._generation) {
      return;
    }
    let eof = false;
    try {
      const chunk = await this.model.api.logs(job.id, this._task, this._offset);
      if (generation !== this._generation) {
        return;
      }
      if (this._task === null || this._tasks.options.length !== chunk.tasks.length) {
        this._tasks.replaceChildren(
          ...chunk.tasks.map(t => {
            const option = document.createElement('option');
            option.value = t;
            option.textContent = t;
            return option;
          })
        );
        this._tasks.style.display = chunk.tasks.length < 2 ? 'none' : '';
      }
      this._task = chunk.task;
      this._tasks.value = chunk.task;
      if (chunk.data) {
        const atBottom =
          this._pre.scrollTop + this._pre.clientHeight >= this._pre.scrollHeight - 4;
        let text = (this._pre.textContent ?? '') + chunk.data;
        if (text.length > MAX_CHARS) {
          text = '…\n' + text.slice(text.length - MAX_CHARS);
        }
        this._pre.textContent = text;
        if (atBottom) {
          this._pre.scrollTop = this._pre.scrollHeight;
        }
      }
      this._offset = chunk.next_offset;
      eof = chunk.eof;
    } catch (error) {
      // No log yet (queued job) or a passing error: retry while the job may still write one.
      this._status.textContent = (error as Error).message;
      if (generation === this._generation && ACTIVE_STATES.has(this._currentState())) {
        this._timer = window.setTimeout(() => void this._poll(generation), FOLLOW_MS * 3);
      }
      return;
    }
    const active = ACTIVE_STATES.has(this._currentState());
    const following = active || !eof;
    this._status.textContent = following ? 'following…' : `ended (${this._currentState()})`;
    this.node.dataset.following = String(following);
    if (following) {
      this._timer = window.setTimeout(() => void this._poll(generation), FOLLOW_MS);
    } else {
      void this._showOutputs(generation); // what it wrote is complete now
    }
  }

  private _job: IJob | null = null;
  private _task: string | null = null;
  private _offset = 0;
  private _timer = 0;
  private _generation = 0;
  private _title: HTMLSpanElement;
  private _tasks: HTMLSelectElement;
  private _status: HTMLSpanElement;
  private _pre: HTMLPreElement;
  private _outputs: HTMLUListElement;
}

/** The log viewer as a main-area tab (one, reused): `app.shell.add(widget, 'main')` by whoever opens it. */
export class LogsWidget extends Widget {
  constructor(readonly viewer: LogViewer) {
    super();
    this.id = 'hive-lab-logs';
    this.addClass('jp-HiveLogsWidget');
    this.title.label = 'Job log';
    this.title.closable = true;
    this.node.appendChild(viewer.node);
    viewer.shown = job => {
      this.title.label = `Log: ${job.name || job.id}`;
      this.title.caption = `${job.name || job.id} · ${job.id}`;
    };
    viewer.closed = () => this.close();
  }

  /** Closing the tab stops following (the widget is kept, to be shown again). */
  protected onCloseRequest(msg: Message): void {
    this.viewer.close();
    super.onCloseRequest(msg);
  }

  dispose(): void {
    this.viewer.dispose();
    super.dispose();
  }
}
