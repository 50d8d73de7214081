/**
 * Route guards: each route states who may call it by calling one of these first. They throw
 * catalogue errors, so every refusal has the same shape and code.
 */
import { HEADERS, isIngestClass } from '@countersign/core';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import type { EmbedPrincipal, IngestPrincipal, KeyPrincipal, MasterPrincipal, Principal } from './principal.js';

/** The caller, resolved once per request and memoised on it. */
export async function principalOf(request: FastifyRequest): Promise<Principal> {
  if (request.principal) return request.principal;
  const p = await request.server.ctx.keys.resolve(request.headers.authorization);
  request.principal = p;
  return p;
}

/** Only the master key. */
export async function requireMaster(request: FastifyRequest): Promise<MasterPrincipal> {
  const p = await principalOf(request);
  if (p.kind !== 'master') throw new ApiError('wrong_credential_class', 'this call needs the master key');
  return p;
}

/** A `human`, `agent` or `service` key (ingest paths). */
export async function requireIngestKey(request: FastifyRequest): Promise<IngestPrincipal> {
  return ingestOnly(await principalOf(request));
}

/**
 * Forward mode: the key travels in `X-Service-Key` (with or without `Bearer `), because
 * `Authorization` there is the upstream's (the SDK's provider key) and is never read as ours.
 */
export async function requireForwardKey(request: FastifyRequest): Promise<IngestPrincipal> {
  if (request.principal) return ingestOnly(request.principal);
  const value = request.headers[HEADERS.serviceKey];
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ApiError('missing_api_key', 'forward mode needs your Countersign key in X-Service-Key (Authorization goes to the upstream)');
  }
  const text = value.trim();
  const p = await request.server.ctx.keys.resolve(/^bearer /i.test(text) ? text : `Bearer ${text}`);
  request.principal = p;
  return ingestOnly(p);
}

function ingestOnly(p: Principal): IngestPrincipal {
  if (p.kind !== 'key' || !isIngestClass(p.credentialClass)) {
    throw new ApiError(
      'wrong_credential_class',
      'ingest needs a key_human_, key_agent_ or key_service_ key; live keys and embed tokens only read',
    );
  }
  return p as IngestPrincipal;
}

/**
 * Read access to `projectId`: a `live` key of that project, or an unexpired embed token of it.
 * Ingest keys get 403 (they write, never read).
 */
export async function requireProjectRead(request: FastifyRequest, projectId: string): Promise<KeyPrincipal | EmbedPrincipal> {
  const p = await principalOf(request);
  if (p.kind === 'master')
    throw new ApiError('wrong_credential_class', 'reading logs needs a key_live_ key of the project, not the master key');
  if (p.kind === 'key' && p.credentialClass !== 'live')
    throw new ApiError('wrong_credential_class', 'ingest keys cannot read; use a key_live_ key of the project');
  if (p.projectId !== projectId) throw new ApiError('project_forbidden', 'this key belongs to another project');
  return p;
}
