/**
 * One linear pass over the UTF-8 bytes of a JSON text (RFC 8259), before anything parses it into
 * objects: how deep it nests, whether `JSON.parse` followed by canonical JSON would keep every
 * value exactly, and where each top-level member's value lies in the bytes. Iterative (no
 * recursion, so 20,000-deep arrays are just a refusal), no `Buffer`, and it allocates per number
 * or key at most, never per character.
 *
 * @packageDocumentation
 */
import { MAX_JSON_DEPTH } from './canonical.js';
import { KEEP_LEVELS, NestedKeys, START_LEVELS } from './json-keys.js';
import { ascii, BACKSLASH, decodeLenient, decodeName, hex4, MINUS, NINE, QUOTE, ScanError, utf8Length, ZERO } from './json-lexical.js';
import { NUMBER_EXACT, NUMBER_NEGATIVE_ZERO, numberIsExact, NumberScan, scanNumber } from './json-number.js';

/** What {@link inspectJson} found in a well-formed JSON text. */
export interface JsonInspection {
  /** Deepest nesting of arrays/objects (a scalar document is 0; `[]` is 1). */
  depth: number;
  /**
   * True when `JSON.parse` + canonical JSON re-serialization keeps every value exactly. False when
   * a number token is not exactly the double JavaScript reads it as (`9007199254740993`, `1e400`
   * (Infinity), `1e-400` (0), `-0`, `0.30000000000000001`), when an object has a duplicate key
   * (compared after unescaping, at any level), or when a string holds a lone surrogate escape.
   */
  lossless: boolean;
  /** Why it is not lossless (the first reason met), for logs and docs. */
  lossyReason?: 'number' | 'duplicate_key' | 'lone_surrogate';
  /**
   * For a top-level object: byte offsets `[start, end)` of each top-level member's VALUE in the
   * input, keyed by the unescaped member name. A duplicated name lists every occurrence in order,
   * so a caller can refuse it. Absent when the document is not an object.
   */
  members?: Map<string, Array<[number, number]>>;
  /** False when a string held bytes that are not UTF-8 (only with `allowInvalidUtf8`). */
  validUtf8: boolean;
  /** How many arrays and objects the text holds (what parsing and canonical JSON cost is made of). */
  containers: number;
}

/**
 * Arrays and objects a JSON text of `bytes` bytes may hold before it is too costly to turn into
 * objects: 16,384 plus one per 64 bytes. `JSON.parse` and canonical JSON spend ~100 and ~170 ns
 * per container whatever their size, so a text of empty arrays (`[[],[],…]`, one per 3 bytes)
 * held the event loop ~150 ms per MB; within this budget it is a few ms per MB, while ordinary
 * documents (records, messages, embeddings: one container per 60 to thousands of bytes) pass.
 */
export function jsonContainerBudget(bytes: number): number {
  return 16_384 + Math.floor(bytes / 64);
}

/** {@link inspectJson}'s answer: the inspection, or the first error and its byte offset. */
export type JsonInspectResult =
  { ok: true; value: JsonInspection } | { ok: false; error: 'syntax' | 'too_deep' | 'invalid_utf8'; offset: number; message: string };

/** Options of {@link inspectJson}. */
export interface JsonInspectOptions {
  /** Deepest nesting accepted (default {@link MAX_JSON_DEPTH}); deeper is error `too_deep`. */
  maxDepth?: number;
  /**
   * Accept bytes that are not UTF-8 inside strings (they decode to U+FFFD, as `TextDecoder` and
   * Node's `Buffer#toString` do) and report them as `validUtf8: false` instead of error `invalid_utf8`.
   */
  allowInvalidUtf8?: boolean;
}

const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];
/** 1 for the characters allowed after a backslash. */
const ESCAPES = new Uint8Array(256);
for (const c of [0x22, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74, 0x75]) ESCAPES[c] = 1;
/** Bytes inside a string: 0 plain ASCII (the hot loop skips these), then what else each is. */
const PLAIN = 0;
const IN_STRING = new Uint8Array(256);
IN_STRING.fill(3, 0, 0x20); // control character
IN_STRING[QUOTE] = 1;
IN_STRING[BACKSLASH] = 2;
IN_STRING.fill(4, 0x80); // start (or not) of a multi-byte sequence
const NO_BYTES = new Uint8Array(0);

/**
 * Inspects a JSON text: a linear single pass over its UTF-8 bytes (RFC 8259 grammar; whitespace
 * around the document allowed; no byte order mark, as `JSON.parse` accepts none).
 *
 * A number token is exact when its decimal value equals that of the shortest round-trip string of
 * `Number(token)` (`1`, `1.0` and `1e0` are exact; `-0` is not, canonical JSON writes `0`; a
 * token that overflows to Infinity or underflows a nonzero value to 0 is not). Tokens of at most
 * 15 significant digits in the normal range are exact by arithmetic alone; longer ones cost a
 * `Number` and a `String` call each.
 *
 * Speed (`npm run bench -- json-scan`; shared 2-core machine, Node 20, whose speed varies): 1.5 to
 * 2.3 ms per MB of prompt-like text (ASCII or not), 6 to 10 ms per MB of key-dense records, 20 to
 * 40 ms per MB of full-precision doubles (16-17 digits, as in an embeddings answer in float format:
 * each such number costs a `Number` and a `String` call); an over-deep text is refused at the
 * first byte past the limit, whatever its size. A small text costs little more than its bytes: the
 * scanner and its working arrays are reused from one scan to the next (0.2-0.3 µs for `{"a":1}`,
 * 1-1.8 µs for a small nested request; 3.2 and 10.6 µs for those when each scan allocated its own).
 */
export function inspectJson(bytes: Uint8Array, opts?: JsonInspectOptions): JsonInspectResult {
  // A scan runs to its end without yielding, so one scanner serves them all; taking it out of
  // `spareScanner` while it works keeps that true even if a scan ever re-entered.
  const scanner = spareScanner ?? new Scanner();
  spareScanner = undefined;
  try {
    return { ok: true, value: scanner.run(bytes, opts?.maxDepth ?? MAX_JSON_DEPTH, opts?.allowInvalidUtf8 === true) };
  } catch (e) {
    if (e instanceof ScanError) return { ok: false, error: e.error, offset: e.offset, message: e.message };
    throw e;
  } finally {
    if (scanner.release()) spareScanner = scanner;
  }
}

let spareScanner: Scanner | undefined;

/** The scanner's state: set afresh by each {@link Scanner.run}, released after it. */
class Scanner {
  #bytes: Uint8Array = NO_BYTES;
  #maxDepth = 0;
  #allowInvalidUtf8 = false;
  #pos = 0;
  #depth = 0;
  #containers = 0;
  #maxSeen = 0;
  #lossyReason: JsonInspection['lossyReason'] = undefined;
  #validUtf8 = true;
  /** Per open container (index depth - 1): 1 for an object. Doubles as nesting grows. */
  #isObject = new Uint8Array(START_LEVELS);
  /** Names of the open objects below the top level (duplicate check). */
  readonly #keys = new NestedKeys();
  #members: Map<string, Array<[number, number]>> | undefined;
  readonly #token = new NumberScan();
  // What the last string held (set by #string).
  #escaped = false;
  #nonAscii = false;
  #invalid = false;
  /** Bytes minus UTF-16 code units before #pos: maps a byte offset into #text while UTF-8 is valid. */
  #shift = 0;
  /** The whole input as text, decoded at the first need (a long number token). */
  #text: string | undefined;

  /** Drops what the last scan read (it can be a caller's data); false when the scanner is better dropped. */
  release(): boolean {
    this.#bytes = NO_BYTES;
    this.#text = undefined;
    this.#members = undefined;
    return this.#keys.release() && this.#isObject.length <= KEEP_LEVELS;
  }

  run(bytes: Uint8Array, maxDepth: number, allowInvalidUtf8: boolean): JsonInspection {
    this.#bytes = bytes;
    this.#maxDepth = maxDepth;
    this.#allowInvalidUtf8 = allowInvalidUtf8;
    this.#depth = 0;
    this.#containers = 0;
    this.#maxSeen = 0;
    this.#lossyReason = undefined;
    this.#validUtf8 = true;
    this.#shift = 0;
    const b = bytes;
    const len = b.length;
    this.#pos = this.#ws(0);
    if (this.#pos >= len) throw new ScanError('syntax', this.#pos, 'no JSON value');
    // The top-level member whose value is being read, and where that value starts.
    let memberKey: string | undefined;
    let memberStart = 0;
    // Each turn reads one value at #pos, then whatever closes or separates after it.
    for (;;) {
      const c = b[this.#pos];
      let opened = false;
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        if (this.#depth >= this.#maxDepth) {
          throw new ScanError('too_deep', this.#pos, `nested deeper than ${this.#maxDepth} levels`);
        }
        const isObject = c === OPEN_OBJECT;
        this.#containers++;
        if (this.#depth + 2 > this.#isObject.length) this.#grow();
        this.#isObject[this.#depth++] = isObject ? 1 : 0;
        if (this.#depth > this.#maxSeen) this.#maxSeen = this.#depth;
        if (isObject) {
          if (this.#depth === 1) this.#members = new Map();
          else this.#keys.open(this.#depth);
        }
        this.#pos = this.#ws(this.#pos + 1);
        opened = b[this.#pos] !== (isObject ? CLOSE_OBJECT : CLOSE_ARRAY);
      } else if (c === QUOTE) {
        this.#string(this.#pos);
      } else if (c === MINUS || (c !== undefined && c >= ZERO && c <= NINE)) {
        this.#number();
      } else if (c === 0x74) {
        this.#literal(TRUE);
      } else if (c === 0x66) {
        this.#literal(FALSE);
      } else if (c === 0x6e) {
        this.#literal(NULL);
      } else {
        throw this.#unexpected('a value');
      }
      if (opened) {
        if (this.#isObject[this.#depth - 1] === 1) {
          const name = this.#memberName();
          if (this.#depth === 1) {
            memberKey = name;
            memberStart = this.#pos;
          }
        }
        continue;
      }
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        // An empty container: #pos is at its closing bracket.
        this.#depth--;
        this.#pos++;
      }
      // After a value: close containers, or find the separator before the next value.
      for (;;) {
        if (this.#depth === 1 && memberKey !== undefined) {
          addMember(this.#members!, memberKey, memberStart, this.#pos);
          memberKey = undefined;
        }
        this.#pos = this.#ws(this.#pos);
        if (this.#depth === 0) {
          if (this.#pos < len) throw this.#unexpected('the end of the text');
          return this.#result();
        }
        const inObject = this.#isObject[this.#depth - 1] === 1;
        const d = b[this.#pos];
        if (d === COMMA) {
          this.#pos = this.#ws(this.#pos + 1);
          if (inObject) {
            const name = this.#memberName();
            if (this.#depth === 1) {
              memberKey = name;
              memberStart = this.#pos;
            }
          }
          break;
        }
        if (d !== (inObject ? CLOSE_OBJECT : CLOSE_ARRAY)) throw this.#unexpected(inObject ? "',' or '}'" : "',' or ']'");
        if (inObject && this.#depth > 1) this.#keys.close(this.#depth);
        this.#depth--;
        this.#pos++;
      }
    }
  }

  /** Doubles the per-level array. */
  #grow(): void {
    const isObject = new Uint8Array(this.#isObject.length * 2);
    isObject.set(this.#isObject);
    this.#isObject = isObject;
  }

  #result(): JsonInspection {
    const out: JsonInspection = {
      depth: this.#maxSeen,
      lossless: this.#lossyReason === undefined,
      validUtf8: this.#validUtf8,
      containers: this.#containers,
    };
    if (this.#lossyReason !== undefined) out.lossyReason = this.#lossyReason;
    if (this.#members !== undefined) out.members = this.#members;
    return out;
  }

  #lossy(reason: NonNullable<JsonInspection['lossyReason']>): void {
    this.#lossyReason ??= reason;
  }

  /**
   * Reads `"name"` `:` at #pos, leaves #pos at the value, and checks the name is new in its
   * object. Returns the name at the top level (for `members`), undefined below it.
   */
  #memberName(): string | undefined {
    const b = this.#bytes;
    const start = this.#pos;
    if (b[start] !== QUOTE) throw this.#unexpected('a member name');
    const end = this.#string(start);
    let name: string | undefined;
    if (this.#depth === 1) {
      name = decodeName(b, start + 1, end - 1, this.#escaped || this.#nonAscii);
      if (this.#members!.has(name)) this.#lossy('duplicate_key');
    } else if (this.#lossyReason === undefined) {
      // Once the text is lossy, nested duplicates change nothing: skip the work.
      const plain = !this.#escaped && !this.#invalid;
      if (this.#keys.isDuplicate(b, this.#depth, start + 1, end - 1, plain, this.#nonAscii)) this.#lossy('duplicate_key');
    }
    this.#pos = this.#ws(end);
    if (b[this.#pos] !== COLON) throw this.#unexpected("':'");
    this.#pos = this.#ws(this.#pos + 1);
    return name;
  }

  /** Scans the string starting with the quote at `start`; returns the offset after its closing quote. */
  #string(start: number): number {
    const b = this.#bytes;
    let i = start + 1;
    let escaped = false;
    let nonAscii = false;
    let invalid = false;
    for (;;) {
      // The hot loop: plain ASCII (an out-of-range read gives undefined, which stops it).
      let kind = IN_STRING[b[i]!];
      while (kind === PLAIN) kind = IN_STRING[b[++i]!];
      if (kind === 1) break;
      if (kind === 2) {
        escaped = true;
        i = this.#escape(i);
      } else if (kind === 4) {
        nonAscii = true;
        const n = utf8Length(b, i);
        if (n > 0) {
          i += n;
          // UTF-16 code units: one for 2- and 3-byte sequences, two for 4-byte ones.
          this.#shift += n === 4 ? 2 : n - 1;
        } else {
          if (!this.#allowInvalidUtf8) throw new ScanError('invalid_utf8', i, 'invalid UTF-8 in a string');
          this.#validUtf8 = false;
          invalid = true;
          i++;
        }
      } else if (kind === 3) {
        throw new ScanError('syntax', i, 'control character in a string');
      } else {
        throw new ScanError('syntax', i, 'unterminated string');
      }
    }
    this.#escaped = escaped;
    this.#nonAscii = nonAscii;
    this.#invalid = invalid;
    this.#pos = i + 1;
    return i + 1;
  }

  /** Checks the escape at `i` (a backslash); returns the offset after it (after both halves of a surrogate pair). */
  #escape(i: number): number {
    const b = this.#bytes;
    const e = b[i + 1];
    if (e === undefined || ESCAPES[e] !== 1) throw new ScanError('syntax', i, 'invalid escape');
    if (e !== 0x75) return i + 2;
    const code = hex4(b, i + 2);
    if (code < 0) throw new ScanError('syntax', i, 'invalid \\u escape');
    if (code < 0xd800 || code > 0xdfff) return i + 6;
    // A high surrogate is whole only when a low-surrogate escape follows at once.
    if (code <= 0xdbff && b[i + 6] === BACKSLASH && b[i + 7] === 0x75) {
      const low = hex4(b, i + 8);
      if (low >= 0xdc00 && low <= 0xdfff) return i + 12;
    }
    this.#lossy('lone_surrogate');
    return i + 6;
  }

  /** Scans a number token at #pos and checks it is exact. */
  #number(): void {
    const start = this.#pos;
    const token = this.#token;
    scanNumber(this.#bytes, start, token);
    this.#pos = token.end;
    if (this.#lossyReason !== undefined || token.verdict === NUMBER_EXACT) return;
    if (token.verdict === NUMBER_NEGATIVE_ZERO || !numberIsExact(this.#tokenText(start, token.end))) this.#lossy('number');
  }

  /** The ASCII token at bytes [start, end), sliced from the decoded text when offsets map exactly. */
  #tokenText(start: number, end: number): string {
    if (!this.#validUtf8) return ascii(this.#bytes, start, end);
    this.#text ??= decodeLenient(this.#bytes);
    const at = start - this.#shift;
    return this.#text.slice(at, at + end - start);
  }

  #literal(word: number[]): void {
    const b = this.#bytes;
    for (let k = 0; k < word.length; k++) {
      if (b[this.#pos + k] !== word[k]) throw new ScanError('syntax', this.#pos + k, 'invalid literal');
    }
    this.#pos += word.length;
  }

  /** The offset of the first non-whitespace byte at or after `i`. */
  #ws(i: number): number {
    const b = this.#bytes;
    for (;;) {
      const c = b[i];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
      i++;
    }
  }

  #unexpected(expected: string): ScanError {
    const c = this.#bytes[this.#pos];
    const found =
      c === undefined ? 'the end of the text' : c >= 0x21 && c < 0x7f ? `'${String.fromCharCode(c)}'` : `byte 0x${c.toString(16)}`;
    return new ScanError('syntax', this.#pos, `expected ${expected}, found ${found}`);
  }
}

function addMember(members: Map<string, Array<[number, number]>>, key: string, start: number, end: number): void {
  const list = members.get(key);
  if (list === undefined) members.set(key, [[start, end]]);
  else list.push([start, end]);
}
