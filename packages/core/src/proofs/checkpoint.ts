/**
 * Rekor v1 checkpoints (signed tree heads in the "signed note" format) and the signed entry
 * timestamp payload. Both sides of the ledger use these helpers, so the bytes that are signed
 * are defined exactly once.
 *
 * Checkpoint text:
 * ```
 * <origin>\n<tree size, decimal>\n<base64 root hash>\n[<extension line>\n...]\n— <name> <base64(keyHint ‖ signature)>\n...
 * ```
 * The signature covers the text up to and including the newline before the blank line. The key
 * hint is the first 4 bytes of the log ID (SHA-256 of the log key's DER SubjectPublicKeyInfo).
 *
 * @packageDocumentation
 */
import { canonicalize } from '../canonical.js';
import { bytesEqual, fromBase64, fromHex, toBase64, toHex, utf8 } from '../encoding.js';
import { CoreError } from '../errors.js';
import { sha256 } from '../hash.js';
import { verifyPlainSignature, type ParsedPublicKey } from './crypto.js';

/** A parsed checkpoint (not yet verified). */
export interface Checkpoint {
  /** First line: log origin, e.g. `rekor.sigstore.dev - 2605736670972794746`. */
  origin: string;
  /** Tree size the checkpoint commits to. */
  treeSize: number;
  /** Root hash (32 bytes). */
  rootHash: Uint8Array;
  /** Optional extension lines (e.g. `Timestamp: <ns>`). */
  extensions: string[];
  /** The exact signed text (note body, ending in a newline). */
  body: string;
  /** Signature lines. */
  signatures: Array<{ name: string; keyHint: Uint8Array; signature: Uint8Array }>;
}

/** The em dash (U+2014) followed by a space that starts every signature line. */
const SIG_PREFIX = '\u2014 ';

/**
 * Parses signed-note checkpoint text.
 * @throws CoreError `invalid_ledger_entry` when it is not a well-formed checkpoint.
 */
export function parseCheckpoint(text: string): Checkpoint {
  const bad = (m: string): CoreError => new CoreError('invalid_ledger_entry', `checkpoint ${m}`);
  if (typeof text !== 'string') throw bad('is not text');
  const split = text.indexOf('\n\n');
  if (split < 0) throw bad('has no blank line between body and signatures');
  const body = text.slice(0, split + 1);
  const lines = body.slice(0, -1).split('\n');
  if (lines.length < 3) throw bad('body needs origin, size and root hash lines');
  const [origin, sizeText, rootText] = lines as [string, string, string];
  if (!origin) throw bad('origin is empty');
  if (!/^(0|[1-9][0-9]*)$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) throw bad('tree size is not a decimal integer');
  let rootHash: Uint8Array;
  try {
    rootHash = fromBase64(rootText);
  } catch {
    throw bad('root hash is not base64');
  }
  if (rootHash.length !== 32) throw bad('root hash is not 32 bytes');
  const sigText = text.slice(split + 2);
  if (!sigText.endsWith('\n')) throw bad('must end with a newline');
  const signatures: Checkpoint['signatures'] = [];
  for (const line of sigText.slice(0, -1).split('\n')) {
    if (!line.startsWith(SIG_PREFIX)) throw bad('signature line does not start with "— "');
    const rest = line.slice(SIG_PREFIX.length);
    const space = rest.lastIndexOf(' ');
    if (space <= 0) throw bad('signature line has no name');
    let blob: Uint8Array;
    try {
      blob = fromBase64(rest.slice(space + 1));
    } catch {
      throw bad('signature is not base64');
    }
    if (blob.length < 5) throw bad('signature is too short');
    signatures.push({ name: rest.slice(0, space), keyHint: blob.slice(0, 4), signature: blob.slice(4) });
  }
  if (signatures.length === 0) throw bad('has no signatures');
  return { origin, treeSize: Number(sizeText), rootHash, extensions: lines.slice(3), body, signatures };
}

/** Checkpoint body text (the signed part) for `origin`, `treeSize` and `rootHash`. */
export function formatCheckpointBody(origin: string, treeSize: number, rootHash: Uint8Array, extensions: readonly string[] = []): string {
  return [origin, String(treeSize), toBase64(rootHash), ...extensions].join('\n') + '\n';
}

/** A full checkpoint: `body`, a blank line, and one signature line per signer. */
export function formatCheckpoint(
  body: string,
  signatures: ReadonlyArray<{ name: string; keyHint: Uint8Array; signature: Uint8Array }>,
): string {
  const lines = signatures.map((s) => `${SIG_PREFIX}${s.name} ${toBase64(new Uint8Array([...s.keyHint, ...s.signature]))}\n`);
  return `${body}\n${lines.join('')}`;
}

/** Rekor log ID: lower-case hex SHA-256 of the log key's DER SubjectPublicKeyInfo. */
export function ledgerLogId(key: ParsedPublicKey): string {
  return toHex(sha256(key.spki));
}

/** Checkpoint key hint of a Rekor v1 log: the first 4 bytes of its log ID. */
export function checkpointKeyHint(logIdHex: string): Uint8Array {
  return fromHex(logIdHex).slice(0, 4);
}

/** Result of {@link verifyCheckpoint}. */
export interface CheckpointCheck {
  /** True when a signature line with the log's key hint verifies. */
  signatureValid: boolean;
  /** The parsed checkpoint, when it parsed. */
  checkpoint?: Checkpoint;
  /** What was found. */
  detail: string;
}

/** Verifies that checkpoint `text` carries a valid signature by the log `key`. Never throws. */
export function verifyCheckpoint(text: string, key: ParsedPublicKey): CheckpointCheck {
  let cp: Checkpoint;
  try {
    cp = parseCheckpoint(text);
  } catch (err) {
    return { signatureValid: false, detail: err instanceof Error ? err.message : String(err) };
  }
  const hint = checkpointKeyHint(ledgerLogId(key));
  const mine = cp.signatures.filter((s) => bytesEqual(s.keyHint, hint));
  if (mine.length === 0) {
    return { signatureValid: false, checkpoint: cp, detail: `no checkpoint signature carries the log's key hint ${toHex(hint)}` };
  }
  const ok = mine.some((s) => verifyPlainSignature(key, utf8(cp.body), s.signature));
  return {
    signatureValid: ok,
    checkpoint: cp,
    detail: ok ? `checkpoint "${cp.origin}" is signed by the log key` : 'checkpoint signature does not verify with the log key',
  };
}

/** The four fields a signed entry timestamp covers. */
export interface SetPayloadFields {
  /** Base64 entry body, exactly as served. */
  body: string;
  /** Unix seconds. */
  integratedTime: number;
  /** Log ID, lower-case hex. */
  logID: string;
  /** Global log index. */
  logIndex: number;
}

/** The exact text a Rekor signed entry timestamp signs: RFC 8785 JSON of the four fields. */
export function ledgerSetPayload(fields: SetPayloadFields): string {
  return canonicalize({ body: fields.body, integratedTime: fields.integratedTime, logID: fields.logID, logIndex: fields.logIndex });
}
