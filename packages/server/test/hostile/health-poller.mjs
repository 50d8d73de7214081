// Polls GET <url>/healthz every 20 ms in its own process (so the test process's own work does
// not count in the figures) until stdin closes, then prints {"n","p99","max","failures"} and exits.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
const url = process.argv[2] + '/healthz';
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const times = [];
let failures = 0;
let running = true;
process.stdin.on('end', () => (running = false));
process.stdin.resume();
while (running) {
  const t0 = performance.now();
  const status = await new Promise((resolve) => {
    const req = http.get(url, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
  });
  times.push(performance.now() - t0);
  if (status !== 200) failures++;
  await new Promise((r) => setTimeout(r, 20));
}
times.sort((a, b) => a - b);
process.stdout.write(
  JSON.stringify({ n: times.length, p99: times[Math.floor(times.length * 0.99)] ?? 0, max: times.at(-1) ?? 0, failures }) + '\n',
);
agent.destroy();
