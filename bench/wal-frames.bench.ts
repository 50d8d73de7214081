/**
 * What the SQLite writer writes per proxied call: WAL frames (one page each, two `pwrite`s and a
 * checksum over the page) by b-tree, for the write-ahead insert and for the outcome, on the real
 * schema (the migrations run by `Store.open`) with the writer thread's own statements
 * (`WRITER_SQL`). Every frame is written by the writer and copied again by the checkpointer,
 * so frames per call is the store's share of the cost of a call, and the b-tree that owns a
 * frame says which part of the schema asked for it.
 *
 * Two orders: each call's two transactions on their own (a quiet server), and the outcome of one
 * call committed with the insert of the next (what group commit does when two calls overlap).
 * Record sizes default to a benchmark call's (`npm run bench -- proxy`: a pending envelope of
 * 586 characters, a final one of 2,352); WAL_FRAMES_PENDING / WAL_FRAMES_FINAL change them.
 * Every call has a trace id of its own unless WAL_FRAMES_TRACELESS=1 (calls without one, as the
 * proxy benchmark's and most SDK calls through forward mode are).
 *
 * Run: `npm run bench -- wal-frames` (a few seconds).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Store } from '../packages/server/src/store/index.js';
import { WRITER_SQL } from '../packages/server/src/store/sqlite-writer.js';
import { INSERT_COLUMNS } from '../packages/server/src/store/write-rows.js';

const PENDING = Number(process.env.WAL_FRAMES_PENDING ?? 586);
const FINAL = Number(process.env.WAL_FRAMES_FINAL ?? 2352);
const TRACELESS = process.env.WAL_FRAMES_TRACELESS === '1';
const CALLS = process.env.BENCH_QUICK === '1' ? 600 : 3000;
const WARM = CALLS / 3;

/** Frames by the b-tree that owns their page, per call. */
type Breakdown = Record<string, number>;

/** The page number of every frame appended to `walFile` since byte `from`. */
function framePages(walFile: string, from: number, pageSize: number): number[] {
  const buf = fs.readFileSync(walFile);
  const pages: number[] = [];
  for (let o = Math.max(from, 32); o + 24 + pageSize <= buf.length; o += 24 + pageSize) pages.push(buf.readUInt32BE(o));
  return pages;
}

async function measure(paired: boolean): Promise<{ insert: number; outcome: number; byTree: Breakdown; pageSize: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'countersign-wal-frames-'));
  try {
    await (await Store.open({ dataDir: dir })).close();
    const db = new Database(path.join(dir, 'countersign.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('wal_autocheckpoint = 0'); // the WAL only grows: every frame of the run stays in it
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const walFile = path.join(dir, 'countersign.db-wal');
    const walSize = () => (fs.existsSync(walFile) ? fs.statSync(walFile).size : 0);
    /** Frames appended to the WAL since it was `size` bytes long. */
    const framesSince = (size: number) => (walSize() - size) / (24 + pageSize);
    const insert = db.prepare(WRITER_SQL.insert);
    const complete = db.prepare(WRITER_SQL.completeBySeq);
    const pendingPayload = 'p'.repeat(PENDING);
    const finalPayload = 'f'.repeat(FINAL);
    const insertRow = () => {
      const now = Date.now();
      const row: Record<string, unknown> = {
        id: 'log_' + crypto.randomBytes(12).toString('hex'),
        project_id: 'prj_bench',
        key_id: 'key_bench',
        received_at: now,
        occurred_at: null,
        actor: 'proxy',
        action: 'proxy.request',
        trace_id: TRACELESS ? null : crypto.randomBytes(16).toString('hex'),
        actor_type: 'service',
        credential_handover_detected: 0,
        source: 'proxy',
        status: 'pending',
        request_proof: 0,
        payload_hash: crypto.randomBytes(32).toString('hex'),
        payload: pendingPayload,
        metadata: null,
        instance_id: 'ins_bench',
        span_id: crypto.randomBytes(8).toString('hex'),
        parent_span_id: null,
        started_at: now,
        ended_at: null,
      };
      return Number(insert.run(...INSERT_COLUMNS.map((c) => row[c])).lastInsertRowid);
    };
    const completeRow = (seq: number) => {
      const now = Date.now();
      complete.run('complete', finalPayload, crypto.randomBytes(32).toString('hex'), now, 200, 1.5, 2.5, now, seq);
    };
    let insertFrames = 0;
    let outcomeFrames = 0;
    let measuredFrom = 0;
    let previous: number | undefined;
    for (let i = 0; i < CALLS; i++) {
      if (i === WARM) measuredFrom = walSize();
      const before = walSize();
      if (paired) {
        // One transaction: this call's insert and the previous call's outcome.
        const done = previous;
        previous = db.transaction(() => {
          const seq = insertRow();
          if (done !== undefined) completeRow(done);
          return seq;
        })();
        if (i >= WARM) insertFrames += framesSince(before);
      } else {
        const seq = db.transaction(() => insertRow())();
        const inserted = framesSince(before);
        const between = walSize();
        db.transaction(() => completeRow(seq))();
        if (i >= WARM) {
          insertFrames += inserted;
          outcomeFrames += framesSince(between);
        }
      }
    }
    const owner = new Map<number, string>();
    for (const r of db.prepare('select name, pageno from dbstat').all() as Array<{ name: string; pageno: number }>)
      owner.set(r.pageno, r.name);
    const byTree: Breakdown = {};
    const calls = CALLS - WARM;
    for (const page of framePages(walFile, measuredFrom, pageSize)) {
      const name = owner.get(page) ?? (page === 1 ? 'page 1' : 'freed or moved');
      byTree[name] = (byTree[name] ?? 0) + 1 / calls;
    }
    for (const k of Object.keys(byTree)) byTree[k] = Math.round(byTree[k]! * 100) / 100;
    db.close();
    return {
      insert: Math.round((insertFrames / calls) * 100) / 100,
      outcome: Math.round((outcomeFrames / calls) * 100) / 100,
      byTree,
      pageSize,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs both orders; prints and returns frames per call. */
export default async function walFramesBench(): Promise<Record<string, unknown>> {
  const alone = await measure(false);
  const paired = await measure(true);
  const line = (name: string, r: { byTree: Breakdown }) => {
    const total = Object.values(r.byTree).reduce((a, b) => a + b, 0);
    const parts = Object.entries(r.byTree)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    return `${name}: ${Math.round(total * 100) / 100} frames per call (${parts})`;
  };
  process.stdout.write(
    [
      `records of ${PENDING} and ${FINAL} characters (pending, final), ${TRACELESS ? 'no trace id' : 'a trace id per call'}, pages of ${alone.pageSize} bytes`,
      `${line('each transaction alone', alone)}; insert ${alone.insert}, outcome ${alone.outcome}`,
      line("outcome with the next call's insert", paired),
    ].join('\n') + '\n',
  );
  return { pending_chars: PENDING, final_chars: FINAL, traceless: TRACELESS, alone, paired };
}
