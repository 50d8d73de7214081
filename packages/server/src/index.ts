/**
 * `@countersign/server`: build the service as a Fastify app, or run it from the CLI.
 *
 * @packageDocumentation
 */
export { buildApp, type AppOverrides } from './app.js';
export { loadConfig, ConfigError, ALL_ROLES, type ServerConfig, type Role, type ConfigFlags } from './config.js';
export { ApiError, ERROR_CATALOGUE, type ApiErrorCode } from './errors.js';
export { Store } from './store/index.js';
export type { AppContext } from './app-context.js';
export type { Principal, KeyPrincipal, IngestPrincipal, EmbedPrincipal, MasterPrincipal } from './auth/principal.js';
