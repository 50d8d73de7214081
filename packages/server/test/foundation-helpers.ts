/**
 * Helpers of the foundation suites: make projects and keys through the real API, post logs.
 */
import assert from 'node:assert/strict';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { TestApp } from './helpers/server.js';

/** A project as created through `POST /v1/projects`. */
export interface MadeProject {
  projectId: string;
  apiKey: string;
  keyId: string;
  clientSecret: string;
}

/** Creates a project whose first key has class `cls`. */
export async function createProject(t: TestApp, cls: 'human' | 'agent' | 'service' | 'live' = 'agent', name = 'p'): Promise<MadeProject> {
  const r = await t.app.inject({
    method: 'POST',
    url: '/v1/projects',
    headers: { authorization: `Bearer ${t.masterKey}` },
    payload: { name, credentialClass: cls },
  });
  assert.equal(r.statusCode, 201, r.body);
  const p = r.json().project;
  return { projectId: p.id, apiKey: p.apiKey, keyId: p.keyId, clientSecret: p.clientSecret };
}

/** Adds a key of `cls` to a project. */
export async function addKey(
  t: TestApp,
  projectId: string,
  cls: 'human' | 'agent' | 'service' | 'live',
): Promise<{ apiKey: string; keyId: string }> {
  const r = await t.app.inject({
    method: 'POST',
    url: `/v1/projects/${projectId}/keys`,
    headers: { authorization: `Bearer ${t.masterKey}` },
    payload: { credentialClass: cls },
  });
  assert.equal(r.statusCode, 201, r.body);
  return { apiKey: r.json().key.apiKey, keyId: r.json().key.id };
}

/** A project with an ingest key of each class and a live key. */
export async function fullProject(t: TestApp, name = 'p') {
  const agent = await createProject(t, 'agent', name);
  const human = await addKey(t, agent.projectId, 'human');
  const service = await addKey(t, agent.projectId, 'service');
  const live = await addKey(t, agent.projectId, 'live');
  return {
    projectId: agent.projectId,
    agent: agent.apiKey,
    human: human.apiKey,
    service: service.apiKey,
    live: live.apiKey,
    clientSecret: agent.clientSecret,
  };
}

/** `POST /v1/log`. */
export function postLog(
  app: FastifyInstance,
  key: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: '/v1/log',
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** GET with a bearer key. */
export function getWith(app: FastifyInstance, key: string | undefined, url: string): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'GET', url, headers: key ? { authorization: `Bearer ${key}` } : {} });
}

/** Asserts an error answer with `status` and `code`, in the one error shape. */
export function assertError(r: LightMyRequestResponse, status: number, code: string): void {
  assert.equal(r.statusCode, status, `expected ${status} ${code}, got ${r.statusCode} ${r.body}`);
  const body = r.json();
  assert.equal(body.success, false);
  assert.equal(body.error.code, code, r.body);
  assert.equal(typeof body.error.message, 'string');
  assert.match(body.error.requestId, /^req_/);
}
