/**
 * Table types for Kysely. One schema for SQLite and PostgreSQL: times are integer epoch
 * milliseconds and flags are integers 0/1 in both, so rows read back the same from either.
 */
import type { Generated } from 'kysely';

/** `projects` */
export interface ProjectsTable {
  id: string;
  name: string;
  /** Verifies the project's HS256 embed tokens; never returned after creation. */
  client_secret: string;
  created_at: number;
}

/** `api_keys`: only SHA-256 of a key is stored. */
export interface ApiKeysTable {
  id: string;
  project_id: string;
  credential_class: string;
  key_hash: string;
  api_key_prefix: string;
  label: string | null;
  created_at: number;
  revoked_at: number | null;
  /** Id of the key this one replaced by rotation. */
  rotated_from: string | null;
}

/** `logs`: one audit log entry; `payload` is the envelope JSON text, never plaintext. */
export interface LogsTable {
  /** Insertion order, for stable cursors. */
  seq: Generated<number>;
  id: string;
  project_id: string;
  key_id: string;
  received_at: number;
  occurred_at: string | null;
  actor: string;
  action: string;
  trace_id: string | null;
  actor_type: string;
  credential_handover_detected: number;
  source: string;
  status: string;
  request_proof: number;
  payload_hash: string | null;
  payload: string;
  metadata: string | null;
  completed_at: number | null;
  /** The instance that owes the outcome of a `pending` proxy record (migration 004); null otherwise. */
  instance_id: string | null;
  /** Upstream HTTP status of a proxied exchange (migration 007); null when none arrived. */
  upstream_status?: number | null;
  /** ms from sending upstream to the upstream's response headers (migration 007). */
  first_byte_ms?: number | null;
  /** ms from receiving the call to its end (migration 007). */
  duration_ms?: number | null;
}

/** `events`: security events (spec 6). */
export interface EventsTable {
  seq: Generated<number>;
  id: string;
  project_id: string;
  type: string;
  reason: string;
  log_id: string;
  created_at: number;
  /** The rest of the event, JSON text. */
  body: string;
}

/** `meta`: small server-wide values (schema notes, generated ids). */
export interface MetaTable {
  key: string;
  value: string;
}

/** Every table. Capabilities that add tables extend this interface in their own migration file. */
export interface Database {
  projects: ProjectsTable;
  api_keys: ApiKeysTable;
  logs: LogsTable;
  events: EventsTable;
  meta: MetaTable;
}
