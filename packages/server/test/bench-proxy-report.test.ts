/**
 * The proxy benchmark's report (bench/proxy/report.ts): the saturation cell gives the CPU per call
 * with its kernel part, and the ratios give the CPU ratio with and without that part. The second
 * is what the instructions benchmark, which counts only a process's own code, can be held against;
 * a wrong subtraction there would send a reader after a gap that is not there.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ratios, table, type RateFigures, type TargetFigures } from '../../../bench/proxy/report.js';

function rate(added: number): RateFigures {
  return {
    p50_ms: 1,
    p99_ms: 2,
    p999_ms: 3,
    max_ms: 4,
    ttfb_p50_ms: 1,
    added_p50_ms: added,
    added_p99_ms: added * 2,
    achieved_rps: 1000,
    errors: 0,
    cpu_us_per_call: 100,
  };
}

function target(label: string, cpu: number, system: number, rps: number): TargetFigures {
  return {
    label,
    rates: { '1000': rate(0.5) },
    saturation: { rps, errors: 0, cpu_us_per_call: cpu, system_us_per_call: system, cpu_cores: 0.95 },
  };
}

describe('proxy benchmark report', () => {
  const all = {
    floor: target('Node floor', 44, 11, 16730),
    cs_sqlite: target('Countersign SQLite', 209, 35, 4738),
  };

  it('gives the CPU ratio at saturation with and without the kernel part', () => {
    const r = ratios(all, 'floor').cs_sqlite!;
    assert.equal(r.saturation_cpu_per_call, 4.75);
    assert.equal(r.saturation_user_cpu_per_call, 5.273); // (209 - 35) / (44 - 11)
    assert.equal(r.saturation_throughput, 0.283);
  });

  it('prints the CPU per call at saturation with its kernel part', () => {
    const lines = table(all, [1000], 32).split('\n');
    assert.match(lines[0]!, /CPU µs\/call \(sat; kernel\)/);
    assert.match(lines[3]!, /\| Countersign SQLite .*\| 4738 +\| 209; 35 +\|/);
  });

  it('leaves the kernel part out where a round has no saturation figures', () => {
    const r = ratios({ floor: { label: 'Node floor', rates: {} }, cs_sqlite: all.cs_sqlite }, 'floor').cs_sqlite!;
    assert.ok(Number.isNaN(r.saturation_user_cpu_per_call));
  });
});
