/**
 * A few DOM helpers, so the views build elements without innerHTML (every value from the API or
 * a decrypted payload is set as text, never parsed as markup).
 */

/** Child accepted by {@link h}: nodes, text, or nothing. */
export type Child = Node | string | number | null | undefined | false;

/** Attributes accepted by {@link h}: `class`, `data-*`, ARIA, and plain string attributes. */
export type Attrs = Record<string, string | number | boolean | undefined | null>;

/**
 * Creates an HTML element with attributes and children. Boolean `true` sets an empty attribute,
 * `false`/`null`/`undefined` leaves it out.
 */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Creates an SVG element (same rules as {@link h}). */
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el: Element, attrs: Attrs): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    el.setAttribute(name, value === true ? '' : String(value));
  }
}

function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === 'number' ? String(c) : c);
  }
}

/** The element with `id`, typed; throws when the page lacks it (a build error, not a user error). */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

/** A short, locale-aware time for a table cell, with the full ISO time as a tooltip. */
export function timeCell(iso: string): HTMLTimeElement {
  const d = new Date(iso);
  const text = Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
  return h('time', { datetime: iso, title: iso }, text);
}

/** Pretty JSON in a `<pre>`. */
export function jsonBlock(value: unknown, cls = 'json'): HTMLPreElement {
  return h('pre', { class: cls }, JSON.stringify(value, null, 2));
}

/** Shortens a long id for display, keeping its start and end. */
export function shortId(id: string, keep = 10): string {
  return id.length <= keep * 2 + 1 ? id : `${id.slice(0, keep)}…${id.slice(-keep)}`;
}
