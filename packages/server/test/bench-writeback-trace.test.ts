/**
 * How the tail benchmark's write-back trace (bench/proxy/writeback-trace.ts) reads `perf script`:
 * the lines below are this machine's, from a trace of a PostgreSQL run (2026-11-28), where the
 * kernel's flusher wrote a relation's pages back while PostgreSQL flushed its WAL. What the
 * benchmark concludes about slow calls rests on which writes count as the flusher's and when a
 * burst ends, so that is held here.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { blockTraceOf } from '../../../bench/proxy/writeback-trace.js';

/** A block request line as `perf script -F comm,time,event,trace` prints it. */
const rq = (comm: string, t: number, what: 'issue' | 'complete', rwbs: string, sector: number, sectors: number) =>
  `${comm.padStart(16)} ${t.toFixed(6)}:  block:block_rq_${what}: 254,0 ${rwbs} ${what === 'issue' ? `${sectors * 512} ` : ''}() ${sector} + ${sectors} 0x2,0,4 [${comm}]`;

describe('the write-back trace of the tail benchmark', () => {
  it("groups the flusher's asynchronous writes into bursts that last until their last write completed", () => {
    const trace = [
      // The flusher's burst: 4 MB + 1 MB + 2 MB issued within 0.2 s of each other.
      rq('kworker/1:1H-kb', 2532.205309, 'issue', 'W', 57982976, 8192),
      rq('kworker/u8:3-ev', 2532.205321, 'issue', 'W', 58007552, 2048),
      // PostgreSQL's WAL flush: synchronous, its own; not the flusher's.
      rq('postgres', 2532.21, 'issue', 'WS', 62704056, 8),
      rq('kworker/1:1H-kb', 2532.35, 'issue', 'W', 58100000, 4096),
      // A read issued by the block layer's worker: not a write-back.
      rq('kworker/1:1H-kb', 2532.36, 'issue', 'RA', 49483456, 16),
      // A cache flush (a commit's fdatasync) issued into the burst waits for it: 330 ms.
      rq('kworker/1:1H-kb', 2532.37, 'issue', 'FF', 0, 0),
      `            node 2532.700000:  block:block_rq_complete: 254,0 FF () 18446744073709551615 + 0 0x0,0,0 [0]`,
      // Completions, in the context the interrupt found.
      rq('node', 2532.3, 'complete', 'W', 57982976, 8192),
      rq('postgres', 2532.31, 'complete', 'WS', 62704056, 8),
      rq('node', 2532.48, 'complete', 'W', 58100000, 4096),
      rq('swapper', 2532.6125, 'complete', 'W', 58007552, 2048),
      // 5 s later: a few pages of a log file (under 1 MB), left out.
      rq('kworker/u8:2-wr', 2537.4, 'issue', 'W', 62936080, 8),
      rq('node', 2537.41, 'complete', 'W', 62936080, 8),
      // 0.3 s after that one, 2 MB: a burst of its own.
      rq('kworker/u8:2-wr', 2537.7, 'issue', 'W', 60000000, 4096),
      rq('node', 2537.75, 'complete', 'W', 60000000, 4096),
      // Flushes 2 s past the last burst: 0.4 ms; two merged into one: both end with it.
      rq('postgres', 2540, 'issue', 'FF', 0, 0),
      `         swapper 2540.000400:  block:block_rq_complete: 254,0 FF () 18446744073709551615 + 0 0x0,0,0 [0]`,
      rq('postgres', 2541, 'issue', 'FF', 0, 0),
      rq('postgres', 2541.0005, 'issue', 'FF', 0, 0),
      `         swapper 2541.001000:  block:block_rq_complete: 254,0 FF () 18446744073709551615 + 0 0x0,0,0 [0]`,
      '',
    ].join('\n');
    const { bursts, flushes, flushesDuringBursts, flushesOtherwise } = blockTraceOf(trace, 1_795_859_265_654);
    assert.equal(bursts.length, 2);
    const [first, second] = bursts;
    assert.equal(first!.bytes, (8192 + 2048 + 4096) * 512);
    assert.equal(Math.round(first!.at), Math.round(2532.205309 * 1000 + 1_795_859_265_654));
    assert.equal(Math.round(first!.ms), 407); // to the last completion, 2532.6125
    assert.equal(second!.bytes, 4096 * 512);
    assert.equal(Math.round(second!.ms), 50);
    assert.deepEqual(flushesDuringBursts, { n: 1, p50_ms: 330, p99_ms: 330, max_ms: 330 });
    assert.equal(flushesOtherwise.n, 3);
    assert.equal(flushesOtherwise.max_ms, 1);
    assert.equal(flushesOtherwise.p50_ms, 0.5);
    assert.deepEqual(flushes, { n: 4, p50_ms: 1, p99_ms: 330, max_ms: 330 });
  });

  it('reads nothing into a trace without the flusher', () => {
    assert.deepEqual(blockTraceOf(rq('postgres', 1, 'issue', 'WS', 8, 8) + '\n' + rq('node', 1.001, 'complete', 'WS', 8, 8), 0).bursts, []);
  });
});
