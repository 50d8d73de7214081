/**
 * Schema validation with type coercion where HTTP needs it and nowhere else.
 *
 * Querystrings, path parameters and headers are text on the wire, so `limit=50` must become the
 * integer 50 and `handover=true` the boolean: those parts keep the app's Ajv options
 * (`coerceTypes: 'array'`). A JSON body already has types, and coercing them accepted
 * `"requestProof":"true"`, `"target":["http://…"]` (a one-item array for a string) and
 * `"actor":5` (issue 8). Bodies are therefore validated by a second Ajv instance with the same
 * options but `coerceTypes: false`: a wrong type is 400 `invalid_request` naming the field.
 */
import AjvCompiler from '@fastify/ajv-compiler';
import type { FastifyServerOptions } from 'fastify';

type ValidatorFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']
>;

/** What Fastify hands the compiler of one route part. */
interface RoutePart {
  schema: unknown;
  method: string;
  url: string;
  httpPart?: string;
}

type PartCompiler = (route: RoutePart) => unknown;

/**
 * A `schemaController.compilersFactory.buildValidator` for Fastify's options: one Ajv instance
 * (from Fastify's own compiler, so formats and options are as before) for bodies without
 * coercion, one for the other parts with the app's `ajv.customOptions`.
 */
export function strictBodyValidator(): ValidatorFactory {
  const pool = AjvCompiler();
  const factory = (externalSchemas: Parameters<typeof pool>[0], options?: Parameters<typeof pool>[1]) => {
    const base = options ?? {};
    const parts = pool(externalSchemas, base) as unknown as PartCompiler;
    const bodies = pool(externalSchemas, {
      ...base,
      customOptions: { ...(base.customOptions ?? {}), coerceTypes: false },
    } as Parameters<typeof pool>[1]) as unknown as PartCompiler;
    return (route: RoutePart) => (route.httpPart === 'body' ? bodies(route) : parts(route));
  };
  return factory as unknown as ValidatorFactory;
}
