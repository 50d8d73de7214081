/**
 * Projects and their keys. Only SHA-256 of a key is stored; the key text exists in the answer
 * to the call that made it and nowhere else.
 */
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** A project as stored. */
export interface ProjectRow {
  id: string;
  name: string;
  clientSecret: string;
  createdAt: number;
  /**
   * The client secret replaced by the last rotation and when it stops verifying embed tokens
   * (epoch ms); absent when no rotation grace period is running or it has ended.
   */
  previousClientSecret?: { secret: string; until: number } | undefined;
}

/** A key as stored (no secret). */
export interface ApiKeyRow {
  id: string;
  projectId: string;
  credentialClass: string;
  keyHash: string;
  apiKeyPrefix: string;
  label: string | null;
  createdAt: number;
  /** When the key stops (or stopped) working; later than now during a rotation grace period. */
  revokedAt: number | null;
  rotatedFrom: string | null;
}

/** Data access for projects and keys. */
export class ProjectRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts a project with its first key, atomically. */
  async createWithKey(project: ProjectRow, key: ApiKeyRow): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      await tx
        .insertInto('projects')
        .values({ id: project.id, name: project.name, client_secret: project.clientSecret, created_at: project.createdAt })
        .execute();
      await tx.insertInto('api_keys').values(toKeyRow(key)).execute();
    });
  }

  /** Sets the origins allowed to embed the project's viewer (null or [] = none). */
  async setEmbedOrigins(id: string, origins: string[] | null): Promise<void> {
    const value = origins && origins.length > 0 ? JSON.stringify(origins) : null;
    await this.db.updateTable('projects').set({ embed_origins: value }).where('id', '=', id).execute();
  }

  /** The origins allowed to embed the project's viewer; [] when none (or no such project). */
  async embedOrigins(id: string): Promise<string[]> {
    const r = await this.db.selectFrom('projects').select('embed_origins').where('id', '=', id).executeTakeFirst();
    if (!r?.embed_origins) return [];
    try {
      const parsed = JSON.parse(r.embed_origins) as unknown;
      return Array.isArray(parsed) ? parsed.filter((o): o is string => typeof o === 'string') : [];
    } catch {
      return [];
    }
  }

  /** One project, or undefined. */
  async get(id: string): Promise<ProjectRow | undefined> {
    const r = await this.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirst();
    if (!r) return undefined;
    const previous = r.client_secret_previous;
    const until = r.client_secret_previous_until;
    return {
      id: r.id,
      name: r.name,
      clientSecret: r.client_secret,
      createdAt: r.created_at,
      previousClientSecret: previous && until !== null && until !== undefined ? { secret: previous, until } : undefined,
    };
  }

  /**
   * Replaces a project's client secret. With `previousUntil` later than now the replaced secret
   * keeps verifying embed tokens until then; otherwise it stops at once. One statement: the
   * replaced secret is read and moved inside the UPDATE (SQL evaluates every right-hand side
   * against the old row), so two concurrent rotations cannot both keep the same old secret.
   * Any earlier previous secret is dropped: its grace period ends now.
   * @returns false when there is no such project.
   */
  async rotateClientSecret(projectId: string, secret: string, previousUntil: number | null): Promise<boolean> {
    const r = await this.db
      .updateTable('projects')
      .set((eb) => ({
        client_secret: secret,
        client_secret_previous: previousUntil === null ? null : eb.ref('client_secret'),
        client_secret_previous_until: previousUntil,
      }))
      .where('id', '=', projectId)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Adds a key to a project. */
  async addKey(key: ApiKeyRow): Promise<void> {
    await this.db.insertInto('api_keys').values(toKeyRow(key)).execute();
  }

  /** The key with this hash, revoked or not. */
  async keyByHash(keyHash: string): Promise<ApiKeyRow | undefined> {
    const r = await this.db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst();
    return r && fromKeyRow(r);
  }

  /** One key of a project. */
  async key(projectId: string, keyId: string): Promise<ApiKeyRow | undefined> {
    const r = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('id', '=', keyId)
      .executeTakeFirst();
    return r && fromKeyRow(r);
  }

  /** Every key of a project, oldest first. */
  async listKeys(projectId: string): Promise<ApiKeyRow[]> {
    const rows = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(fromKeyRow);
  }

  /**
   * Marks a key revoked at `at`; returns false when it was already revoked or does not exist.
   * A key in a rotation grace period (revocation scheduled later) is revoked now.
   */
  async revokeKey(projectId: string, keyId: string, at: number): Promise<boolean> {
    const r = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('project_id', '=', projectId)
      .where('id', '=', keyId)
      .where((eb) => eb.or([eb('revoked_at', 'is', null), eb('revoked_at', '>', at)]))
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /**
   * Schedules the revocation of `oldKeyId` at `revokeAt` (default `at`: at once; later for a
   * grace period) and adds `replacement`, in one transaction (rotation). False when the old key
   * was already revoked or rotated.
   */
  async rotateKey(projectId: string, oldKeyId: string, replacement: ApiKeyRow, at: number, revokeAt: number = at): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const r = await tx
        .updateTable('api_keys')
        .set({ revoked_at: revokeAt })
        .where('project_id', '=', projectId)
        .where('id', '=', oldKeyId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) === 0) return false;
      await tx.insertInto('api_keys').values(toKeyRow(replacement)).execute();
      return true;
    });
  }
}

function toKeyRow(k: ApiKeyRow): Database['api_keys'] {
  return {
    id: k.id,
    project_id: k.projectId,
    credential_class: k.credentialClass,
    key_hash: k.keyHash,
    api_key_prefix: k.apiKeyPrefix,
    label: k.label,
    created_at: k.createdAt,
    revoked_at: k.revokedAt,
    rotated_from: k.rotatedFrom,
  };
}

function fromKeyRow(r: Database['api_keys']): ApiKeyRow {
  return {
    id: r.id,
    projectId: r.project_id,
    credentialClass: r.credential_class,
    keyHash: r.key_hash,
    apiKeyPrefix: r.api_key_prefix,
    label: r.label,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
    rotatedFrom: r.rotated_from,
  };
}
