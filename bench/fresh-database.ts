/**
 * A throwaway PostgreSQL database for a benchmark, on the server of `base` (DATABASE_URL).
 */
import pg from 'pg';

/** Creates a database with a random name; `drop` removes it (closing its connections). */
export async function freshDatabase(base: string, prefix = 'cs_bench_'): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = prefix + Math.random().toString(36).slice(2, 10);
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(base);
  u.pathname = '/' + name;
  return {
    url: u.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`).catch(() => undefined);
      await c.end();
    },
  };
}
