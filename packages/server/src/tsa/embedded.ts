/**
 * The embedded TSA of one app: its identity (made on first start) and a responder whose
 * serials come from the store, shared by the `POST /tsa` route and the in-process witness.
 */
import type { AppContext } from '../app-context.js';
import { loadTsaIdentity, type TsaIdentity } from './identity.js';
import { respond, type RespondOutcome } from './responder.js';

/** The embedded TSA. */
export interface EmbeddedTsa {
  readonly identity: TsaIdentity;
  /** Answers one DER TimeStampReq (never throws; faults become `systemFailure` rejections). */
  respond(der: Uint8Array): Promise<RespondOutcome>;
}

const instances = new WeakMap<AppContext, Promise<EmbeddedTsa>>();

async function create(ctx: AppContext): Promise<EmbeddedTsa> {
  const identity = await loadTsaIdentity(ctx);
  const rc = {
    identity,
    now: ctx.now,
    allocateSerial: (t: Parameters<typeof ctx.store.tsaTokens.allocateSerial>[0]) => ctx.store.tsaTokens.allocateSerial(t),
  };
  return { identity, respond: (der) => respond(rc, der) };
}

/** The embedded TSA of `ctx`'s app (one per app, created on first use). */
export function getEmbeddedTsa(ctx: AppContext): Promise<EmbeddedTsa> {
  let p = instances.get(ctx);
  if (!p) {
    p = create(ctx);
    // A failed start (store down) must not be cached forever.
    p.catch(() => instances.delete(ctx));
    instances.set(ctx, p);
  }
  return p;
}
