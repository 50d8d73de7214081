/** Shows API errors with their code, message and request id (never a stack). */
import { ApiCallError } from './api.js';
import { h } from './dom.js';

/** An error as displayed: code, message, and the request id when the server gave one. */
export function errorView(err: unknown): HTMLElement {
  if (err instanceof ApiCallError) {
    return h(
      'span',
      { 'data-code': err.code },
      h('span', { class: 'code' }, err.code),
      err.message,
      err.requestId ? h('span', { class: 'rid' }, `(${err.requestId})`) : null,
    );
  }
  return h('span', { 'data-code': 'error' }, h('span', { class: 'code' }, 'error'), err instanceof Error ? err.message : String(err));
}

/** Fills (and shows) an error box, or hides it when `err` is undefined. */
export function showError(box: HTMLElement, err: unknown): void {
  if (err === undefined) {
    box.hidden = true;
    box.replaceChildren();
    return;
  }
  box.replaceChildren(errorView(err));
  box.hidden = false;
}
