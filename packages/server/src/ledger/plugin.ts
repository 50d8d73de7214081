/**
 * The embedded transparency ledger over HTTP: the Rekor v1 API under `/api/v1/log`, so Rekor
 * clients (and our own {@link RekorClient}) talk to it unchanged. Public like Rekor: reading
 * and submitting need no key; a submission must be a hashedrekord whose signature verifies.
 * What differs from Rekor v1 is listed in docs/ledger-and-tsa.md.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import { DuplicateLedgerEntryError } from '../store/index.js';
import { checkProposedEntry, InvalidEntryError } from './entries.js';
import { getEmbeddedLedger } from './log.js';

const TAGS = ['ledger'];
const UUID_PATTERN = '^([0-9a-fA-F]{64}|[0-9a-fA-F]{80})$';
/** rekor-cli sends `treeID` (decimal) to the public key and consistency proof paths. */
const treeIdQuery = { type: 'string', pattern: '^[0-9]+$', description: "Rekor shard selector; only this ledger's own tree ID is known" };

const inclusionProofSchema = {
  type: 'object',
  properties: {
    logIndex: { type: 'integer' },
    rootHash: { type: 'string' },
    treeSize: { type: 'integer' },
    hashes: { type: 'array', items: { type: 'string' } },
    checkpoint: { type: 'string' },
  },
};
const logEntrySchema = {
  type: 'object',
  description: 'One key, the entry UUID (16-hex tree ID + 64-hex leaf hash), mapping to the entry.',
  additionalProperties: {
    type: 'object',
    properties: {
      body: { type: 'string', description: 'base64 of the canonical hashedrekord JSON' },
      integratedTime: { type: 'integer' },
      logID: { type: 'string' },
      logIndex: { type: 'integer' },
      verification: {
        type: 'object',
        properties: { inclusionProof: inclusionProofSchema, signedEntryTimestamp: { type: 'string' } },
      },
    },
  },
};

/** Ledger plugin. */
export default async function ledgerPlugin(app: FastifyInstance): Promise<void> {
  // Made (or loaded) now, so a first start creates the key before the first request.
  const ledger = await getEmbeddedLedger(app.ctx);
  if (!app.ctx.config.publicUrl) {
    app.ctx.log.warn(
      'no --public-url (COUNTERSIGN_PUBLIC_URL) is set: ledger checkpoints are signed under the listen address and receipts ' +
        'point there, so Sigstore clients reaching this ledger by another URL reject its checkpoints; set the public URL',
    );
  }
  /** Rekor answers 400 for a tree ID it does not know; so do we (there is one tree). */
  const checkTreeId = (treeID: string | undefined): void => {
    if (treeID !== undefined && treeID !== ledger.identity.treeId)
      throw new ApiError('invalid_request', `${treeID} is not a tree of this ledger; its only tree is ${ledger.identity.treeId}`);
  };

  app.get(
    '/api/v1/log',
    {
      schema: {
        tags: TAGS,
        summary: 'Signed tree head: size, root and a signed-note checkpoint',
        security: [],
        response: {
          200: {
            type: 'object',
            properties: {
              rootHash: { type: 'string' },
              signedTreeHead: { type: 'string' },
              treeSize: { type: 'integer' },
              treeID: { type: 'string' },
            },
          },
        },
      },
    },
    async () => {
      const head = await ledger.treeHead();
      return { rootHash: head.rootHash, signedTreeHead: head.checkpoint, treeSize: head.treeSize, treeID: ledger.identity.treeId };
    },
  );

  app.get<{ Querystring: { treeID?: string } }>(
    '/api/v1/log/publicKey',
    {
      schema: {
        tags: TAGS,
        summary: "The ledger's public key (PEM SubjectPublicKeyInfo)",
        security: [],
        querystring: { type: 'object', properties: { treeID: treeIdQuery }, additionalProperties: false },
      },
    },
    async (request, reply) => {
      checkTreeId(request.query.treeID);
      return reply.type('application/x-pem-file').send(ledger.identity.publicKeyPem);
    },
  );

  app.get<{ Querystring: { logIndex: number } }>(
    '/api/v1/log/entries',
    {
      schema: {
        tags: TAGS,
        summary: 'The entry at a log index, with its inclusion proof and signed entry timestamp',
        security: [],
        querystring: {
          type: 'object',
          required: ['logIndex'],
          properties: { logIndex: { type: 'integer', minimum: 0 } },
          additionalProperties: false,
        },
        response: { 200: logEntrySchema },
      },
    },
    async (request) => {
      const entry = await ledger.entryByIndex(request.query.logIndex);
      if (!entry) throw new ApiError('not_found', `the ledger has no entry at index ${request.query.logIndex}`);
      return entry;
    },
  );

  app.get<{ Params: { entryUUID: string } }>(
    '/api/v1/log/entries/:entryUUID',
    {
      schema: {
        tags: TAGS,
        summary: 'The entry with a UUID (64-hex leaf hash, or 80-hex tree ID + leaf hash)',
        security: [],
        params: { type: 'object', properties: { entryUUID: { type: 'string', pattern: UUID_PATTERN } } },
        response: { 200: logEntrySchema },
      },
    },
    async (request) => {
      const entry = await ledger.entryByUuid(request.params.entryUUID);
      if (!entry) throw new ApiError('not_found', `the ledger has no entry ${request.params.entryUUID}`);
      return entry;
    },
  );

  app.post(
    '/api/v1/log/entries',
    {
      bodyLimit: 64 * 1024,
      schema: {
        tags: TAGS,
        summary: 'Submit a hashedrekord v0.0.1 entry (its signature must verify over its digest)',
        security: [],
        body: { type: 'object', required: ['kind', 'apiVersion', 'spec'] },
        response: { 201: logEntrySchema },
      },
    },
    async (request, reply) => {
      let entry;
      try {
        entry = checkProposedEntry(request.body);
      } catch (e) {
        if (e instanceof InvalidEntryError) throw new ApiError('invalid_ledger_entry', e.message);
        throw e;
      }
      try {
        const row = await ledger.append(entry);
        const uuid = ledger.uuidOf(row.leafHash);
        return reply
          .code(201)
          .header('location', `/api/v1/log/entries/${uuid}`)
          .header('etag', uuid)
          .send(await ledger.entryResponse(row));
      } catch (e) {
        if (e instanceof DuplicateLedgerEntryError) {
          const location = `/api/v1/log/entries/${ledger.uuidOf(e.existing.leafHash)}`;
          throw new ApiError('ledger_entry_exists', `this entry is already in the ledger at index ${e.existing.logIndex}`, {
            headers: { location },
          });
        }
        throw e;
      }
    },
  );

  app.post<{ Body: { entryUUIDs?: string[]; logIndexes?: number[] } }>(
    '/api/v1/log/entries/retrieve',
    {
      schema: {
        tags: TAGS,
        summary: 'Several entries by UUID and/or log index (at most 10 of each); unknown ones are left out',
        security: [],
        body: {
          type: 'object',
          properties: {
            entryUUIDs: { type: 'array', maxItems: 10, items: { type: 'string', pattern: UUID_PATTERN } },
            logIndexes: { type: 'array', maxItems: 10, items: { type: 'integer', minimum: 0 } },
          },
          additionalProperties: false,
        },
        response: { 200: { type: 'array', items: logEntrySchema } },
      },
    },
    async (request) => {
      const found = await Promise.all([
        ...(request.body.entryUUIDs ?? []).map((u) => ledger.entryByUuid(u)),
        ...(request.body.logIndexes ?? []).map((i) => ledger.entryByIndex(i)),
      ]);
      return found.filter((e) => e !== undefined);
    },
  );

  app.get<{ Querystring: { firstSize: number; lastSize: number; treeID?: string } }>(
    '/api/v1/log/proof',
    {
      schema: {
        tags: TAGS,
        summary: 'RFC 9162 consistency proof between two tree sizes (hashes hex, with the root of lastSize)',
        security: [],
        querystring: {
          type: 'object',
          required: ['lastSize'],
          properties: {
            firstSize: { type: 'integer', minimum: 1, default: 1 },
            lastSize: { type: 'integer', minimum: 1 },
            treeID: treeIdQuery,
          },
          additionalProperties: false,
        },
        response: {
          200: { type: 'object', properties: { rootHash: { type: 'string' }, hashes: { type: 'array', items: { type: 'string' } } } },
        },
      },
    },
    async (request) => {
      const { firstSize, lastSize, treeID } = request.query;
      checkTreeId(treeID);
      if (firstSize > lastSize)
        throw new ApiError('invalid_request', `firstSize (${firstSize}) must not be greater than lastSize (${lastSize})`);
      const proof = await ledger.consistency(firstSize, lastSize);
      if (!proof) throw new ApiError('invalid_request', `lastSize (${lastSize}) is beyond the current tree size`);
      return proof;
    },
  );
}
