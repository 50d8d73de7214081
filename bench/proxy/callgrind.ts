/**
 * A process under valgrind's callgrind, for counting the instructions it executes per call
 * (bench/instructions.bench.ts). An instruction count does not depend on how fast the machine
 * is at the moment, or on what else runs on it: the same binary, inputs and environment give the
 * same total. On these VMs, whose speed halves or doubles within hours, that makes it the one
 * figure of work per call that can be compared from one run to the next.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { collectorInstructions } from './callgrind-collector.js';
import { readyLine, stopProcess } from './children.js';

/** True when valgrind is installed. */
export const HAS_VALGRIND = spawnSync('valgrind', ['--version']).status === 0;

/** A process running under callgrind, with its output directory. */
export interface CallgrindChild {
  proc: ChildProcess;
  info: Record<string, string>;
  /** Sets every thread's counters to zero (what ran before is not counted). */
  zero(): void;
  /** Writes the counters out and reads them: instructions per thread since the last {@link zero}. */
  dump(): ThreadInstructions[];
  stop(): Promise<void>;
}

/** Instructions one thread executed, and what the thread is (told from the code it ran). */
export interface ThreadInstructions {
  thread: number;
  role: 'event loop' | 'SQLite writer' | 'SQLite checkpointer' | 'JIT compiler' | 'other';
  instructions: number;
  /** Of {@link instructions}, those V8's garbage collector ran (callgrind-collector.ts); counted on the event loop only. */
  collector: number;
}

/** Starts `script` with Node under callgrind (counters per thread); resolves once it prints its JSON line. */
export async function startUnderCallgrind(
  script: string,
  env: Record<string, string>,
  nodeFlags: readonly string[],
): Promise<CallgrindChild> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callgrind-'));
  const args = [
    '--tool=callgrind',
    '--separate-threads=yes',
    // V8 writes machine code at run time; valgrind must see it change.
    '--smc-check=all-non-file',
    `--callgrind-out-file=${dir}/cg.%p`,
    process.execPath,
    ...nodeFlags,
    script,
  ];
  const proc = spawn('valgrind', args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
  const info = await readyLine(proc, 'the process under callgrind', () => `: ${err}`).info;
  const pid = proc.pid!;
  let dumps = 0;
  const control = (flag: string) => {
    const r = spawnSync('callgrind_control', [flag, String(pid)], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`callgrind_control ${flag} failed: ${r.stderr}`);
  };
  return {
    proc,
    info,
    zero: () => control('-z'),
    dump: () => {
      control('-d');
      dumps++;
      // One file per thread for each dump: cg.<pid>.<dump>-<thread>.
      const prefix = `cg.${pid}.${dumps}-`;
      return fs
        .readdirSync(dir)
        .filter((f) => f.startsWith(prefix))
        .map((f) => readThread(path.join(dir, f)));
    },
    stop: async () => {
      // Under valgrind a process takes a while to close its app.
      await stopProcess(proc, 60_000);
      // INSTRUCTIONS_KEEP=1 leaves the files, for `callgrind_annotate <file>` (cost by function).
      if (process.env.INSTRUCTIONS_KEEP === '1') console.log(`  callgrind files kept in ${dir}`);
      else fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * One thread's file: its total, and its role from the functions it ran. The writer inserts rows
 * (`sqlite3BtreeInsert`); the checkpointer copies the WAL (`walCheckpoint`) and inserts nothing;
 * V8's platform threads, with `--single-threaded-gc`, run only the optimizing compiler (which
 * keeps optimizing functions long after the warm-up: ~100 a thousand calls after 2,000 calls,
 * 12 in the 8,000 after 8,000, measured with `--trace-opt`).
 */
function readThread(file: string): ThreadInstructions {
  const text = fs.readFileSync(file, 'utf8');
  const thread = Number(/^thread: (\d+)$/m.exec(text)?.[1] ?? 0);
  const instructions = Number(/^(?:summary|totals): (\d+)$/m.exec(text)?.[1] ?? 0);
  let role: ThreadInstructions['role'] = 'other';
  if (thread === 1) role = 'event loop';
  else if (text.includes('sqlite3BtreeInsert')) role = 'SQLite writer';
  else if (text.includes('walCheckpoint')) role = 'SQLite checkpointer';
  else if (text.includes('OptimizingCompileDispatcher')) role = 'JIT compiler';
  // With `--single-threaded-gc` the collector runs on the event loop alone.
  const collector = role === 'event loop' ? collectorInstructions(text) : 0;
  return { thread, role, instructions, collector };
}
