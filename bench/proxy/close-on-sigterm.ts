/** How a benchmark's Countersign process ends (bench/proxy/roles.ts, callgrind-target.ts). */
import fs from 'node:fs';

/** On SIGTERM: closes the app (as `countersign serve` does), removes its data directory, exits. */
export function closeOnSigterm(app: { close(): Promise<unknown> }, dataDir: string): void {
  process.on('SIGTERM', () => {
    void app
      .close()
      .catch(() => undefined)
      .finally(() => {
        fs.rmSync(dataDir, { recursive: true, force: true });
        process.exit(0);
      });
  });
}
