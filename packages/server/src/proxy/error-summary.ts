/**
 * What the proxy logs about an error it met: never the error object itself, whose properties
 * (an undici error's request, a store error's parameters) may hold headers, bodies or keys.
 */

/** An error reduced to what is safe to log (never headers or bodies, which may hold secrets). */
export function errorSummary(err: unknown): { name: string; code?: string; message: string } {
  const e = err as { name?: string; code?: string; message?: string };
  return {
    name: String(e?.name ?? 'Error'),
    ...(e?.code ? { code: String(e.code) } : {}),
    message: String(e?.message ?? err).slice(0, 300),
  };
}
