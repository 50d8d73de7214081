/**
 * Sequence numbers that were missing when a reader passed them: what the live log stream
 * (logs/stream.ts) needs to show an entry that committed after a later one.
 *
 * A row's `seq` is taken when it is inserted and the row becomes visible when its transaction
 * commits. One instance's writer commits its inserts in `seq` order, but on PostgreSQL every
 * instance of a fleet has its own writer: a `seq` taken first on one instance can become visible
 * after a later `seq` of another. A reader that tails by `seq` would step past the first for good.
 * So the stream asks which numbers below its position are missing (in flight elsewhere, or never
 * to come: an insert that found its id taken, a rolled-back batch) and looks for them again
 * until they appear or the store deadline says they never will.
 *
 * On SQLite every insert goes through the one writer thread, whose transactions commit in the
 * order they took their numbers: nothing is ever missing behind a visible row, so both reads
 * answer nothing without a query.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { Dialect } from './open.js';

/** Most numbers one {@link SeqGapRepository.missing} call looks at (the newest of its range). */
export const MAX_GAP_SCAN = 20_000;

/** Reads of missing and late sequence numbers of `logs`, over every project. */
export class SeqGapRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
  ) {}

  /** Whether rows can become visible out of `seq` order in this store (a PostgreSQL fleet). */
  get outOfOrder(): boolean {
    return this.dialect === 'postgres';
  }

  /**
   * In one snapshot: the highest number any row holds (`after` when none is higher), and the
   * numbers in (`after`, that] that no row of any project holds, ascending; at most the newest
   * {@link MAX_GAP_SCAN} of the range are looked at. A reader that then reads rows up to `upTo`
   * (a later snapshot: it sees at least what this one saw) misses nothing of the range but
   * `missing`, which it watches.
   */
  async missing(after: number): Promise<{ upTo: number; missing: number[] }> {
    if (!this.outOfOrder) return { upTo: after, missing: [] };
    const r = await sql<{ top: string | number | null; seq: string | number | null }>`
      with top as (select coalesce(max(seq), 0) as top from logs)
      select top.top, s.seq from top
      left join lateral (
        select g as seq from generate_series(greatest(${after}::int8 + 1, top.top - ${MAX_GAP_SCAN - 1}), top.top) as g
        where not exists (select 1 from logs where logs.seq = g)
      ) s on true
      order by s.seq`.execute(this.db);
    const upTo = Math.max(after, Number(r.rows[0]?.top ?? 0));
    const missing = r.rows.filter((x) => x.seq !== null).map((x) => Number(x.seq));
    return { upTo, missing };
  }

  /** Which of `seqs` are held by a row now, with the row's project. */
  async present(seqs: number[]): Promise<Array<{ seq: number; projectId: string }>> {
    if (!this.outOfOrder || seqs.length === 0) return [];
    const rows = await this.db.selectFrom('logs').select(['seq', 'project_id']).where('seq', 'in', seqs).execute();
    return rows.map((r) => ({ seq: Number(r.seq), projectId: r.project_id }));
  }
}
