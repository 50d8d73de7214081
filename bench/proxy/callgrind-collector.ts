/**
 * How many of a thread's instructions V8's garbage collector ran, from a callgrind file.
 *
 * Why apart: in a window of a few hundred calls the collector's work is lumpy. A scavenge every
 * few dozen calls is steady, but whether a mark-sweep of the old generation lands in the window is
 * chance, and one that does adds a tenth to the Node floor's count (2026-11-29: the floor read 323
 * thousand instructions per call in three runs and 348-359 in three, 310-312 in all six without its
 * collector). Counted apart, the rest of the event loop's work repeats within 1 %, and the
 * collector's share is still shown.
 *
 * The count is by function name, each function's own (exclusive) instructions: those of the
 * scavenger, the mark-compact collector, the sweeper, the write barrier's remembered sets, the
 * visitors they use, and the free lists a sweep leaves (allocating from them, refilling an
 * allocation area) with the allocation observers that start a collection. Allocation in an area
 * (a bump of a pointer, in the JIT's code) is the program's, not the collector's.
 */

/** Names of V8's collector functions (demangled C++, as callgrind writes them). */
const COLLECTOR_FUNCTION =
  /Scaveng|Sweep|MarkCompact|Marking|Evacuat|RememberedSet|SlotSet|PretenuringHandler|GCTracer|RecordMigratedSlot|PointersUpdating|v8::internal::Heap::(?:CollectGarbage|PerformGarbageCollection|GarbageCollection|IterateRoots|Iterate\w*Roots)|HeapObject::SizeFromMap|heap::base::Worklist|cppgc::internal::(?:Marker|Sweeper)|ClearNonLiveReferences|WeakObjectRetainer|FreeList|CompactionSpace|RefillLab|PagedSpaceBase::(?:SetTopAndLimit|FreeLinearAllocationArea)|IterateObjectCache|ShouldBePromoted|ActiveSystemPages|AllocationObserver|CreateFillerObjectAtBackground/;

/**
 * The instructions that functions of V8's collector ran in one callgrind output file (one
 * thread's, with `--separate-threads=yes`).
 *
 * The format (valgrind's "Callgrind Format Specification"): `fn=(id) name` starts a function's
 * block, the name given only where the id first appears (in an `fn=` or a `cfn=` line); a cost
 * line is `<position> <instructions>`; a `calls=` line is followed by one cost line that is the
 * callee's inclusive cost, charged to the callee's own block already, so skipped here.
 */
export function collectorInstructions(text: string): number {
  const names = new Map<string, string>();
  const own = new Map<string, number>();
  let current: string | undefined;
  let nextIsCallCost = false;
  for (const line of text.split('\n')) {
    const first = line.charCodeAt(0);
    // A cost line starts with a digit, a sign or '*' (relative positions).
    if ((first >= 48 && first <= 57) || first === 43 || first === 45 || first === 42) {
      if (nextIsCallCost) {
        nextIsCallCost = false;
        continue;
      }
      const cost = Number(line.slice(line.indexOf(' ') + 1));
      if (current !== undefined && Number.isFinite(cost)) own.set(current, (own.get(current) ?? 0) + cost);
      continue;
    }
    if (line.startsWith('calls=')) {
      nextIsCallCost = true;
      continue;
    }
    const named = /^(c?)fn=\((\d+)\)(?: (.*))?$/.exec(line);
    if (!named) continue;
    const [, callee, id, name] = named;
    if (name !== undefined) names.set(id!, name);
    if (callee === '') current = id;
  }
  let collector = 0;
  for (const [id, cost] of own) if (COLLECTOR_FUNCTION.test(names.get(id) ?? '')) collector += cost;
  return collector;
}
