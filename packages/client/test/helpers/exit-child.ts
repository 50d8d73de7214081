// A program that logs and ends without flush() or shutdown(): the client must deliver on beforeExit.
import { ServiceClient } from '../../src/index.js';

const client = new ServiceClient({
  apiKey: process.env.CS_KEY!,
  encryptionKey: 'first secret',
  endpoint: process.env.CS_ENDPOINT!,
  delivery: { flushIntervalMs: 60_000 },
});
for (let i = 0; i < 3; i++) console.log(await client.log({ action: 'exit.test', traceId: 'trace-exit', payload: { i } }));
