/**
 * `npm run bench -- json-scan`: core's `inspectJson`, the one pass over a JSON text's bytes that
 * every JSON body takes before anything parses it (twice per proxied call: the caller's body and
 * the answer), against `JSON.parse` of the same bytes decoded, in the same run. The texts are the
 * kinds the proxy sees: tiny and small requests, the proxy benchmark's request and 1 KB answer (its
 * call's two scans), a 1 KB chat request as an SDK sends it, 1 MB of prompt-like text (ASCII and
 * not), key-dense records, an embeddings answer of full-precision doubles, and a 20,000-deep array
 * (refused at the first byte past the limit). The texts are the same every run, so runs compare.
 *
 * What it answers: what the scan costs per text and per MB (the figures `inspectJson`'s comment
 * gives), and that it stays a fraction of what parsing the same text costs. For a code change in
 * the scanner, run it before and after at one moment of the machine: the ratio to `JSON.parse`
 * moves less than the microseconds. It runs in this process, unpinned; for a quieter reading,
 * `taskset -c 1 npm run bench -- json-scan`. `BENCH_QUICK=1` takes fewer timings.
 */
import { inspectJson, MAX_JSON_DEPTH } from '../packages/core/src/index.js';
import { JSON_1K } from '../packages/server/test/helpers/upstreams.js';
import { REQUEST_BODY } from './proxy/load.js';

const QUICK = process.env.BENCH_QUICK === '1';
const ROUNDS = QUICK ? 3 : 7;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface Sample {
  name: string;
  bytes: Uint8Array;
  /** Scans per timing; a timing is a few ms at least, so the clock's granularity does not show. */
  perTiming: number;
  /** Refused by the scan at the depth limit: a parse of the whole text is no baseline for that. */
  refused?: boolean;
}

function samples(): Sample[] {
  const json = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));
  const chat = {
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'You are helpful.' },
      { role: 'user', content: 'x'.repeat(800) },
    ],
    temperature: 0.2,
    max_tokens: 256,
    stream: false,
  };
  const records = Array.from({ length: 20_000 }, (_, i) => ({ id: i, name: `n${i}`, ok: true, tags: ['a', 'b'], v: { x: i, y: null } }));
  return [
    { name: '{"a":1}', bytes: json({ a: 1 }), perTiming: 200_000 },
    {
      name: 'small nested request',
      bytes: json({ model: 'm', messages: [{ role: 'user', content: 'hello' }], meta: { a: { b: [1, 2, 3] } } }),
      perTiming: 100_000,
    },
    { name: "the proxy benchmark's request", bytes: encoder.encode(REQUEST_BODY), perTiming: 100_000 },
    { name: "the proxy benchmark's 1 KB answer", bytes: new Uint8Array(JSON_1K), perTiming: 50_000 },
    { name: '1 KB chat request', bytes: json(chat), perTiming: 50_000 },
    {
      name: '1 MB prompt-like text',
      bytes: json({ messages: [{ role: 'user', content: 'Lorem ipsum dolor sit amet, «ça va» — 日本語 '.repeat(20_000) }] }),
      perTiming: 20,
    },
    { name: '1.5 MB key-dense records', bytes: json(records), perTiming: 10 },
    {
      name: '1.2 MB full-precision doubles',
      bytes: json({ data: [{ embedding: Array.from({ length: 60_000 }, (_, i) => Math.sin(i)) }] }),
      perTiming: 5,
    },
    { name: '20,000-deep array', bytes: encoder.encode('['.repeat(20_000) + ']'.repeat(20_000)), perTiming: 20_000, refused: true },
  ];
}

/** The fastest of ROUNDS timings of `n` calls, in µs per call (the least disturbed by the machine). */
function best(n: number, task: () => unknown): number {
  for (let i = 0; i < Math.min(n, 2_000); i++) task(); // warm-up: the JIT and the working arrays
  let fastest = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) task();
    fastest = Math.min(fastest, Number(process.hrtime.bigint() - t0) / 1e3 / n);
  }
  return fastest;
}

export default async function jsonScanBench(): Promise<Record<string, unknown>> {
  const rows: Array<Record<string, unknown>> = [];
  const lines = ['| text | bytes | inspectJson µs | per MB, ms | JSON.parse µs | scan / parse |', '| --- | --: | --: | --: | --: | --: |'];
  for (const s of samples()) {
    const n = QUICK ? Math.max(1, Math.ceil(s.perTiming / 10)) : s.perTiming;
    const result = inspectJson(s.bytes, { maxDepth: MAX_JSON_DEPTH });
    if (result.ok === (s.refused === true)) throw new Error(`${s.name}: inspectJson answered ${JSON.stringify(result).slice(0, 200)}`);
    const scan = best(n, () => inspectJson(s.bytes, { maxDepth: MAX_JSON_DEPTH }));
    const parse = s.refused ? undefined : best(n, () => JSON.parse(decoder.decode(s.bytes)));
    const mb = s.bytes.length / (1024 * 1024);
    const perMb = mb >= 0.5 ? scan / 1e3 / mb : undefined;
    rows.push({
      text: s.name,
      bytes: s.bytes.length,
      scanMicros: scan,
      parseMicros: parse,
      scanMsPerMb: perMb,
      scanToParse: parse && scan / parse,
    });
    lines.push(
      `| ${s.name} | ${s.bytes.length} | ${scan.toFixed(2)} | ${perMb?.toFixed(2) ?? ''} | ${parse?.toFixed(2) ?? '(refused)'} | ${parse ? '×' + (scan / parse).toFixed(2) : ''} |`,
    );
  }
  process.stdout.write(lines.join('\n') + '\n');
  return { rounds: ROUNDS, rows };
}
