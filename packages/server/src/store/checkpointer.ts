/**
 * SQLite WAL checkpoints off the request path. By default SQLite copies the WAL back into the
 * database inside whichever commit crosses 1,000 pages, so one request in a few hundred waits for
 * it: that was the proxy's p99 (measured: 6 ms p99 with automatic checkpoints, 3 ms without).
 * Here the serving connection never checkpoints (`wal_autocheckpoint = 0`) and a worker thread
 * with its own connection runs PASSIVE checkpoints on a timer, which in WAL mode proceed beside
 * writers without blocking them.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the worker checkpoints. */
const EVERY_MS = 250;

// CommonJS run by the worker (eval), so it needs no file of its own in src/ or dist/.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 1000');
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch { /* busy or closing: next tick */ }
}, workerData.everyMs);
parentPort.on('message', (m) => {
  if (m !== 'stop') return;
  clearInterval(timer);
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch {}
  db.close();
  parentPort.postMessage('stopped');
});
parentPort.postMessage('ready');
`;

/** A running background checkpointer. */
export class WalCheckpointer {
  private constructor(private readonly worker: Worker) {}

  /** Starts the worker for the database file `file`; resolves once it has opened the file. */
  static async start(file: string): Promise<WalCheckpointer> {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, driver, everyMs: EVERY_MS } });
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
    });
    // A checkpointer that dies must not take the server with it: SQLite then just grows the WAL
    // until the next start, and nothing is lost.
    worker.on('error', () => undefined);
    worker.unref();
    return new WalCheckpointer(worker);
  }

  /** Runs a last checkpoint and stops the worker. */
  async stop(): Promise<void> {
    const stopped = new Promise<void>((resolve) => {
      this.worker.once('message', () => resolve());
      this.worker.once('exit', () => resolve());
    });
    this.worker.postMessage('stop');
    await Promise.race([stopped, new Promise((r) => setTimeout(r, 2000))]);
    await this.worker.terminate();
  }
}
