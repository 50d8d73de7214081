/**
 * The instructions benchmark's count of V8's collector (bench/proxy/callgrind-collector.ts): it
 * reads a callgrind file's functions and sums the own instructions of the collector's. The
 * benchmark's repeatable ratio rests on that sum taking each function's own cost once: a call's
 * inclusive cost skipped, a name given once and then used by its id, relative positions read.
 * The file below is in callgrind's format as valgrind 3.19 writes it (`--separate-threads=yes`,
 * `positions: line`, `events: Ir`), cut down to the cases that matter.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { collectorInstructions } from '../../../bench/proxy/callgrind-collector.js';

const FILE = `# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 8968
part: 1
thread: 1

positions: line
events: Ir
summary: 10470

ob=(1) /usr/bin/node
fl=(1) ???
fn=(1) v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace, v8::internal::GarbageCollectionReason, v8::GCCallbackFlags)
0 100
cfn=(2) v8::internal::ScavengerCollector::CollectGarbage()
calls=3 0
0 5000
+2 20

fn=(2)
0 1000
cfn=(3) heap::base::SlotCallbackResult v8::internal::Scavenger::ScavengeObject<v8::internal::FullHeapObjectSlot>(v8::internal::FullHeapObjectSlot, v8::internal::HeapObject)
calls=40 0
0 4000

fn=(3)
0 4000

fn=(4) Builtins_LoadIC
0 300
-1 200
* 5

fn=(5) llhttp__internal_execute
0 700
cfn=(6) v8::internal::Sweeper::RawSweep(v8::internal::Page*, v8::internal::FreeSpaceTreatmentMode, v8::internal::Sweeper::SweepingMode)
calls=1 0
0 145

fn=(6)
0 145
fn=(7) 0x000000000d0f4ac0
0 4000
`;

describe("the instructions benchmark's count of V8's collector", () => {
  it("sums the collector's functions' own instructions, each once", () => {
    // CollectGarbage 100 + 20, the scavenger's collector 1,000, ScavengeObject 4,000, RawSweep 145;
    // not the calls' inclusive 5,000, 4,000 and 145 again, nor LoadIC, llhttp or JIT code.
    assert.equal(collectorInstructions(FILE), 100 + 20 + 1000 + 4000 + 145);
  });

  it('counts nothing in a thread that ran no collector function', () => {
    const program = `events: Ir\nfn=(1) Builtins_LoadIC\n0 300\ncfn=(2) llhttp__internal_execute\ncalls=1 0\n0 50\nfn=(2)\n0 50\n`;
    assert.equal(collectorInstructions(program), 0);
  });
});
