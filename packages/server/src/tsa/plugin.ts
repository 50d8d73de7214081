/**
 * The embedded RFC 3161 timestamp authority over HTTP (RFC 3161 §3.4):
 * `POST /tsa` (application/timestamp-query → application/timestamp-reply), and its
 * certificates: `GET /tsa/certs.pem` (signer then root), `/tsa/root.pem`, `/tsa/tsa.pem`.
 * A malformed or unacceptable query gets a DER `rejection` reply (HTTP 200, as RFC 3161
 * clients expect), never a crash; a wrong content type gets the JSON 415 error.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import { getEmbeddedTsa } from './embedded.js';

const QUERY_TYPE = 'application/timestamp-query';
const REPLY_TYPE = 'application/timestamp-reply';
/** A TimeStampReq is a few hundred bytes; anything much larger is not one. */
const QUERY_LIMIT = 64 * 1024;

const pemSchema = (description: string) => ({
  tags: ['tsa'],
  summary: description,
  security: [],
  response: { 200: { description: 'PEM text', content: { 'application/pem-certificate-chain': { schema: { type: 'string' } } } } },
});

/** Tsa plugin. */
export default async function tsaPlugin(app: FastifyInstance): Promise<void> {
  // Made (or loaded) now, so a first start creates the CA before the first request.
  const tsa = await getEmbeddedTsa(app.ctx);

  // Any body type reaches the handler as bytes, so a wrong type gets a clear answer.
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: QUERY_LIMIT }, (_req, body, done) => done(null, body));

  app.post(
    '/tsa',
    {
      bodyLimit: QUERY_LIMIT,
      schema: {
        tags: ['tsa'],
        summary: 'RFC 3161 timestamp: DER TimeStampReq in, DER TimeStampResp out',
        description:
          'Accepts SHA-256/384/512 imprints, honours nonce and certReq, and answers malformed or unacceptable queries with an RFC 3161 rejection (status 2 and a failure bit).',
        security: [],
        consumes: [QUERY_TYPE],
        produces: [REPLY_TYPE],
      },
    },
    async (request, reply) => {
      const type = String(request.headers['content-type'] ?? '')
        .split(';')[0]!
        .trim()
        .toLowerCase();
      if (type !== QUERY_TYPE || !Buffer.isBuffer(request.body)) {
        throw new ApiError('unsupported_media_type', `send a DER TimeStampReq with Content-Type: ${QUERY_TYPE}`);
      }
      const outcome = await tsa.respond(new Uint8Array(request.body));
      if (outcome.error) request.log.error({ err: outcome.error }, 'embedded TSA could not issue a timestamp');
      else if (!outcome.granted) request.log.debug({ reason: outcome.reason }, 'timestamp query rejected');
      return reply.code(200).type(REPLY_TYPE).header('cache-control', 'no-store').send(Buffer.from(outcome.response));
    },
  );

  const pem = (text: string) => (_req: unknown, reply: import('fastify').FastifyReply) =>
    reply.type('application/pem-certificate-chain').send(text);
  app.get('/tsa/certs.pem', { schema: pemSchema('The TSA certificate chain: signer first, root CA last') }, pem(tsa.identity.chainPem));
  app.get(
    '/tsa/root.pem',
    { schema: pemSchema('The TSA root CA certificate (the trust anchor for verifiers)') },
    pem(tsa.identity.rootPem),
  );
  app.get('/tsa/tsa.pem', { schema: pemSchema('The TSA signing certificate alone') }, pem(tsa.identity.tsaPem));
}
