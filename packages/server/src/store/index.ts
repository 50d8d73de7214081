/**
 * The store: the one place with SQL. Every capability reaches the database through a
 * repository of this object, never through Kysely directly.
 */
import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import type { Database } from './schema.js';
import { DEFAULT_STORE_TIMEOUT_MS, openDatabase, type Dialect, type OpenStoreOptions } from './open.js';
import { ProjectRepository } from './projects.js';
import { LogRepository } from './logs.js';
import { ProxyOutcomeRepository } from './proxy-outcomes.js';
import { LogWriter } from './log-writer.js';
import { EventRepository } from './events.js';
import { Notifier } from './notify.js';
import { InstanceLiveness } from './instances.js';
import { TsaTokenRepository, WitnessKeyRepository } from './tsa-witness.js';
import { LedgerRepository } from './ledger.js';
import { ProofRepository } from './proofs.js';
import { WebhookRepository } from './webhooks.js';
import { RetentionRepository } from './retention.js';
import { SeqGapRepository } from './seq-gaps.js';

export type { Dialect, OpenStoreOptions } from './open.js';
export { DEFAULT_STORE_TIMEOUT_MS } from './open.js';
export { StoreTimeoutError } from './log-writer.js';
export type { ProjectRow, ApiKeyRow } from './projects.js';
export type { NewLog, LogRow, LogCompletion, LogFilter } from './logs.js';
export type { RowRef } from './log-writer.js';
export type { EventRow } from './events.js';
export type { NotifyChannel, NotifyHandler } from './notify.js';
export type { NewTsaToken } from './tsa-witness.js';
export { DuplicateLedgerEntryError, type LedgerEntryRow } from './ledger.js';
export type { ProofBatchRow, ProofBatchState, StoredReceipt, ClaimedLeaf, PlacedLeaf } from './proofs.js';
export type { WebhookRow, DeliveryRow, AttemptRow, AttemptResult } from './webhooks.js';
export type { PurgeBatch, ProjectDeletion } from './retention.js';

/** The open store with its repositories. */
export class Store {
  /** Projects and keys. */
  readonly projects: ProjectRepository;
  /** Audit log entries. */
  readonly logs: LogRepository;
  /** Security events. */
  readonly events: EventRepository;
  /** Cross-instance notifications (LISTEN/NOTIFY on PostgreSQL, in process on SQLite). */
  readonly notifier: Notifier;
  /** Key material of the embedded TSA and ledger (PostgreSQL deployments). */
  readonly witnessKeys: WitnessKeyRepository;
  /** Serials of issued timestamps (embedded TSA). */
  readonly tsaTokens: TsaTokenRepository;
  /** The embedded transparency ledger's append-only entries. */
  readonly ledger: LedgerRepository;
  /** Proof batches and receipts. */
  readonly proofs: ProofRepository;
  /** Group-committed outcomes of proxied exchanges. */
  readonly proxyOutcomes: ProxyOutcomeRepository;
  /** This instance's id and liveness lock (who owes the outcome of a pending proxy record). */
  readonly instance: InstanceLiveness;
  /** Outbound webhooks, their deliveries and delivery log (migration 008). */
  readonly webhooks: WebhookRepository;
  /** Sequence numbers missing behind visible rows (the live log stream; seq-gaps.ts). */
  readonly seqGaps: SeqGapRepository;
  /** Retention settings, the expiry purge and project deletion (migration 009). */
  readonly retention: RetentionRepository;

  private constructor(
    /** Kysely handle: for repositories inside `store/` only. */
    readonly db: Kysely<Database>,
    /** Which database this is. */
    readonly dialect: Dialect,
    /** The PostgreSQL pool, when the dialect is postgres. */
    readonly pgPool: pg.Pool | undefined,
    /** The hot-path writer (log inserts and proxy outcomes, off the event loop). */
    private readonly writer: LogWriter,
    /** The SQLite data directory's lock (data-dir-lock.ts), released by close(). */
    private readonly dataDirLock: { close(): unknown } | undefined,
  ) {
    this.projects = new ProjectRepository(db);
    this.logs = new LogRepository(db, writer, dialect);
    this.events = new EventRepository(db);
    this.notifier = new Notifier(pgPool);
    this.witnessKeys = new WitnessKeyRepository(db);
    this.tsaTokens = new TsaTokenRepository(db);
    this.ledger = new LedgerRepository(db, dialect);
    this.proofs = new ProofRepository(db, pgPool);
    this.proxyOutcomes = new ProxyOutcomeRepository(writer);
    this.instance = new InstanceLiveness(pgPool);
    this.webhooks = new WebhookRepository(db, dialect);
    this.retention = new RetentionRepository(db, pgPool);
    this.seqGaps = new SeqGapRepository(db, dialect);
  }

  /** Opens (and migrates) the store described by `options`. */
  static async open(options: OpenStoreOptions): Promise<Store> {
    const { db, dialect, pgPool, writer, dataDirLock } = await openDatabase(options);
    const store = new Store(db, dialect, pgPool, new LogWriter(writer!, options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS), dataDirLock);
    try {
      await store.notifier.start();
      await store.instance.start();
    } catch (e) {
      await store.close(); // releases whatever was opened, the data directory's lock included
      throw e;
    }
    return store;
  }

  /** True when the database answers a trivial query. */
  async ping(): Promise<boolean> {
    try {
      await sql`select 1`.execute(this.db);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Marks interrupted the write-ahead records of proxy exchanges whose instance is gone (this
   * process's predecessor after a crash, or another instance that died); see instances.ts.
   */
  markOrphanedRecordsInterrupted(at: number): Promise<number> {
    return this.logs.markOrphansInterrupted(at, this.instance);
  }

  /** Waits for every queued write (log inserts and proxy outcomes). */
  drain(): Promise<void> {
    return this.writer.drain();
  }

  /** Waits for queued writes, then closes connections. */
  async close(): Promise<void> {
    await this.drain();
    await this.instance.close();
    await this.notifier.close();
    await this.writer.close();
    await this.db.destroy();
    this.dataDirLock?.close();
  }
}
