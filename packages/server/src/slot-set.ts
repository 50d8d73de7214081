/**
 * A set for objects that come and go by the thousand per second: the exchanges in flight, the
 * store batches in flight.
 *
 * Why not a `Set`: V8 rebuilds a Map's or Set's hash table as entries come and go, and the
 * table it leaves keeps a link to its successor and the entries it held (for live iterators).
 * Once one table of a long-lived Set has been promoted to the old generation, that chain makes
 * every later table, and every entry any of them held, reachable to the scavenger, which cannot
 * tell that the old table is garbage: each call's objects (and everything reachable from them)
 * survive two scavenges, get promoted, and wait for a full GC. Measured on the proxy at 1,000
 * calls/s: ~6 KB promoted per call and a major GC every ~7 s (docs/performance-log.md, "Garbage
 * that outlived its call"). An array with swap-remove holds no such reference: removing an item
 * clears its slot.
 */

type Slotted = Record<symbol, number | undefined>;

/**
 * Add, delete, has and size in O(1), without a hash table. Each set keeps an item's position
 * in a symbol-keyed property of the item, its own symbol, so an item may be in several sets.
 */
export class SlotSet<T extends object> implements Iterable<T> {
  readonly #items: T[] = [];
  readonly #slot = Symbol('slot');

  /** How many items are in the set. */
  get size(): number {
    return this.#items.length;
  }

  /** Adds `item` (an item already in this set is left where it is). */
  add(item: T): this {
    const s = item as unknown as Slotted;
    const at = s[this.#slot];
    if (at !== undefined && this.#items[at] === item) return this;
    s[this.#slot] = this.#items.length;
    this.#items.push(item);
    return this;
  }

  /** Removes `item`; false when it was not in the set. */
  delete(item: T): boolean {
    const s = item as unknown as Slotted;
    const i = s[this.#slot];
    if (i === undefined || this.#items[i] !== item) return false;
    const last = this.#items.pop()!;
    if (last !== item) {
      this.#items[i] = last;
      (last as unknown as Slotted)[this.#slot] = i;
    }
    s[this.#slot] = undefined;
    return true;
  }

  /** True when `item` is in the set. */
  has(item: T): boolean {
    const i = (item as unknown as Slotted)[this.#slot];
    return i !== undefined && this.#items[i] === item;
  }

  /** The items as they are now (a copy: deleting while iterating is safe). */
  [Symbol.iterator](): Iterator<T> {
    return [...this.#items][Symbol.iterator]();
  }
}
