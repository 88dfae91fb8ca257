/**
 * Notifications that keep what to do visible. A Lab toast shows at most 140 characters of its
 * message and cuts the rest, which is where a sentence usually says what to do; so a toast here is a
 * short message with its actions as buttons (Open, Show log, ...), and a message that would still be
 * cut keeps its first part in the toast and the whole text behind a "Details" button.
 */
import { Notification, showDialog, Dialog } from '@jupyterlab/apputils';

/** What a Lab toast shows of a message (@jupyterlab/apputils' notification.js cuts beyond it). */
export const TOAST_CHARS = 140;

/** `text` fit for a toast: whole when it fits, else cut at a word boundary with `…` (and `true`). */
export function toastText(text: string, limit = TOAST_CHARS): [string, boolean] {
  if (text.length <= limit) {
    return [text, false];
  }
  const room = text.slice(0, limit - 1);
  const space = room.lastIndexOf(' ');
  return [(space > limit / 2 ? room.slice(0, space) : room).replace(/[\s,;:—-]+$/, '') + '…', true];
}

/**
 * `Notification.emit` whose message is never cut unseen: a message too long for the toast gets a
 * "Details" button (first, as the part cut is what it would hide) showing all of it.
 */
export function notify(
  message: string,
  type: Notification.TypeOptions,
  options: { autoClose?: number | false; actions?: Notification.IAction[] } = {}
): string {
  return Notification.emit(...toastArgs(message, type, options));
}

/** `Notification.update`'s counterpart of `notify`. */
export function notifyUpdate(
  id: string,
  message: string,
  type: Notification.TypeOptions,
  options: { autoClose?: number | false; actions?: Notification.IAction[] } = {}
): boolean {
  const [shown, , opts] = toastArgs(message, type, options);
  return Notification.update({ id, message: shown, type, ...opts });
}

function toastArgs(
  message: string,
  type: Notification.TypeOptions,
  options: { autoClose?: number | false; actions?: Notification.IAction[] }
): [string, Notification.TypeOptions, { autoClose?: number | false; actions: Notification.IAction[] }] {
  const [shown, cut] = toastText(message);
  const actions = [...(options.actions ?? [])];
  if (cut) {
    actions.push({
      label: 'Details',
      caption: 'Read the whole message',
      callback: event => {
        event.preventDefault(); // keep the toast: its other buttons still apply
        void showDialog({ title: 'hive-lab', body: message, buttons: [Dialog.okButton()] });
      }
    });
  }
  return [shown, type, { autoClose: options.autoClose, actions }];
}
