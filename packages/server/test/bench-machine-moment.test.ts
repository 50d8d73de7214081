/**
 * The benchmarks' probe of the machine's moment (bench/proxy/machine-moment.ts): it runs a real
 * Node process on a core and reads back four prices. What a report concludes from them rests on
 * each being a positive, finite figure in its unit, and on the wake-up's price being what pacing
 * adds (not the work itself), so that is held here, on small samples.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatMoment, measureMachineMoment, QUICK_PROBE } from '../../../bench/proxy/machine-moment.js';

describe("the benchmarks' probe of the machine's moment", () => {
  it('measures the four prices on a core, each a positive finite figure in its unit', async () => {
    const m = await measureMachineMoment('0', QUICK_PROBE);
    for (const [name, v] of Object.entries(m)) assert.ok(Number.isFinite(v), `${name} is ${v}`);
    // A loop step is well under a microsecond and a system call well under a millisecond, on any
    // machine this runs on; the round trip between two threads takes at least a system call.
    assert.ok(m.computeNs > 0 && m.computeNs < 1000, `loop step ${m.computeNs} ns`);
    assert.ok(m.syscallUs > 0 && m.syscallUs < 1000, `system call ${m.syscallUs} µs`);
    assert.ok(m.roundTripUs > 0 && m.roundTripUs < 100_000, `round trip ${m.roundTripUs} µs`);
    // What pacing adds may be tiny on a machine whose idle costs nothing, but it is not the unit
    // of work itself (8 µs and up) counted twice, nor a timer's full millisecond.
    assert.ok(m.wakeUs > -50 && m.wakeUs < 1000, `wake-up ${m.wakeUs} µs`);
    const line = formatMoment(m);
    assert.match(line, /^loop step [\d.]+ ns, system call [\d.]+ µs, wake-up from idle -?\d+ µs of CPU, thread round trip \d+ µs$/);
  });
});
