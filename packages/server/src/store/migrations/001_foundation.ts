/**
 * Foundation tables: projects, keys, logs, events. Written once for both dialects; the only
 * difference is how an auto-increment column is spelled.
 */
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../open.js';

/** Applies the migration. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const seq = (t: Parameters<Kysely<unknown>['schema']['createTable']>[0]) =>
    dialect === 'postgres'
      ? db.schema.createTable(t).addColumn('seq', 'bigserial', (c) => c.primaryKey())
      : db.schema.createTable(t).addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement());

  await db.schema
    .createTable('meta')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('projects')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('client_secret', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
    .addColumn('credential_class', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('api_key_prefix', 'text', (c) => c.notNull())
    .addColumn('label', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .addColumn('rotated_from', 'text')
    .execute();
  await db.schema.createIndex('api_keys_project').on('api_keys').column('project_id').execute();

  await seq('logs')
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('occurred_at', 'text')
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('trace_id', 'text')
    .addColumn('actor_type', 'text', (c) => c.notNull())
    .addColumn('credential_handover_detected', 'integer', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('request_proof', 'integer', (c) => c.notNull())
    .addColumn('payload_hash', 'text')
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('metadata', 'text')
    .addColumn('completed_at', 'bigint')
    .execute();
  await db.schema.createIndex('logs_project_seq').on('logs').columns(['project_id', 'seq']).execute();
  await db.schema.createIndex('logs_project_trace').on('logs').columns(['project_id', 'trace_id', 'seq']).execute();
  await db.schema.createIndex('logs_status').on('logs').columns(['status']).execute();

  await seq('events')
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('log_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('events_project_seq').on('events').columns(['project_id', 'seq']).execute();
  void sql;
}
