/**
 * Vite build of the dashboard: `index.html` + `src/` → `dist/`, which the server serves at `/`.
 * `@countersign/core` is bundled from its TypeScript source (the one verifier, envelope and
 * canonical JSON the server and client use), so building core first is not needed.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const coreSource = fileURLToPath(new URL('../core/src/index.ts', import.meta.url));

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  // Static assets only; the page itself is index.html at the package root.
  publicDir: false,
  resolve: { alias: { '@countersign/core': coreSource } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    // The verifier chunk (pkijs, asn1js, noble) and ELK's worker are large by nature; both load on demand.
    chunkSizeWarningLimit: 2000,
  },
  server: { proxy: { '/v1': 'http://127.0.0.1:8080', '/api': 'http://127.0.0.1:8080' } },
});
