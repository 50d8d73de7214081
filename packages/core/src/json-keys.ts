/**
 * Duplicate member names below the top level of a JSON text, for `inspectJson` (json-text.ts),
 * internal to core. The top level's names are decoded anyway (they key `members`); below it a
 * name is usually short plain ASCII, so it is compared byte for byte with its object's earlier
 * names, and decoded into a Set only when it cannot be (escapes, invalid UTF-8) or when the
 * object has many names.
 */
import { decodeName } from './json-lexical.js';

/** Past this many names, or on an escaped one, an object's duplicate check uses a Set of names. */
const KEYS_BY_BYTES = 16;
/** Nesting the per-depth arrays of a scan (these and the scanner's, json-text.ts) start with. */
export const START_LEVELS = 66;
/** Nesting those arrays keep between scans: a deeper text grows them for its scan only. */
export const KEEP_LEVELS = 256;
/** Name ranges kept between scans; past this, as past {@link KEEP_LEVELS}, the arrays are dropped. */
const KEEP_RANGES = 1024;

/**
 * The names of every open object below the top level. One instance serves scan after scan (see
 * `inspectJson`): its typed arrays each have a memory block outside the heap that the young
 * generation's collector frees in its pause, and there are two scans per proxied call. Nothing in
 * them is read before the current scan writes it: a level's slots are set when its object opens,
 * ranges below the top only, and a Set is cleared when an object starts using it.
 */
export class NestedKeys {
  /** Names so far as byte ranges [start, end) of their contents: flat pairs, a stack. */
  #ranges = new Int32Array(64);
  #top = 0;
  /** Per depth: where the open object's pairs start in #ranges. */
  #base = new Int32Array(START_LEVELS);
  /** Per depth: 1 once the object at that depth checks names in a Set. */
  #setActive = new Uint8Array(START_LEVELS);
  readonly #sets: Array<Set<string> | undefined> = [];

  /** An object opens at `depth` (1 is the top level, which this class does not check). */
  open(depth: number): void {
    if (depth >= this.#base.length) this.#grow(depth);
    this.#base[depth] = this.#top;
    this.#setActive[depth] = 0;
  }

  /** The object at `depth` closes: its names are dropped. */
  close(depth: number): void {
    this.#top = this.#base[depth]!;
  }

  /**
   * True when the name with contents bytes [start, end) is already a name of the object at
   * `depth`; otherwise records it. `plain` when the raw bytes are the name exactly (no escape,
   * valid UTF-8); `nonAscii` when they hold multi-byte characters.
   */
  isDuplicate(b: Uint8Array, depth: number, start: number, end: number, plain: boolean, nonAscii: boolean): boolean {
    const top = this.#top;
    if (this.#setActive[depth] === 0) {
      const base = this.#base[depth]!;
      if (plain && top - base < 2 * KEYS_BY_BYTES) {
        if (this.#seenAsBytes(b, base, start, end)) return true;
        let ranges = this.#ranges;
        if (top + 2 > ranges.length) {
          ranges = new Int32Array(ranges.length * 2);
          ranges.set(this.#ranges);
          this.#ranges = ranges;
        }
        ranges[top] = start;
        ranges[top + 1] = end;
        this.#top = top + 2;
        return false;
      }
      // From now on this object's names live in a Set: those so far move in, decoded.
      let set = this.#sets[depth];
      if (set === undefined) set = this.#sets[depth] = new Set();
      else set.clear();
      for (let k = base; k < top; k += 2) set.add(decodeName(b, this.#ranges[k]!, this.#ranges[k + 1]!, true));
      this.#setActive[depth] = 1;
    }
    const set = this.#sets[depth]!;
    const name = decodeName(b, start, end, !plain || nonAscii);
    if (set.has(name)) return true;
    set.add(name);
    return false;
  }

  /**
   * Readies the instance for the next scan: names read from the text stay in no Set past the scan
   * (they can be a caller's data). False when this text grew the arrays unusually large, so the
   * instance is better dropped than kept.
   */
  release(): boolean {
    for (const set of this.#sets) set?.clear();
    this.#top = 0;
    return this.#base.length <= KEEP_LEVELS && this.#ranges.length <= KEEP_RANGES && this.#sets.length <= KEEP_LEVELS;
  }

  /** Whether the bytes [start, end) equal the contents of a recorded name from `base` on. */
  #seenAsBytes(b: Uint8Array, base: number, start: number, end: number): boolean {
    const ranges = this.#ranges;
    const length = end - start;
    for (let k = base; k < this.#top; k += 2) {
      const s = ranges[k]!;
      if (ranges[k + 1]! - s !== length) continue;
      let same = true;
      for (let j = 0; j < length; j++) {
        if (b[s + j] !== b[start + j]) {
          same = false;
          break;
        }
      }
      if (same) return true;
    }
    return false;
  }

  /** Doubles the per-depth arrays until `depth` fits. */
  #grow(depth: number): void {
    let size = this.#base.length * 2;
    while (size <= depth) size *= 2;
    const base = new Int32Array(size);
    base.set(this.#base);
    this.#base = base;
    const setActive = new Uint8Array(size);
    setActive.set(this.#setActive);
    this.#setActive = setActive;
  }
}
