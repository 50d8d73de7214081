/**
 * The step-by-step verification report shared by receipt, timestamp and ledger verification.
 * Verification reports; it does not throw: every check becomes a step with a status and a
 * sentence saying why, which the dashboard shows as the verification log.
 *
 * @packageDocumentation
 */

/** Outcome of one check. `skip` means "not checked" and never makes a report fail by itself. */
export type StepStatus = 'pass' | 'fail' | 'skip';

/** Identifier of a verification step (stable: the dashboard and docs refer to these). */
export type VerificationStepId =
  | 'receipt_format'
  | 'payload_hash'
  | 'merkle_path'
  | 'timestamp_token'
  | 'timestamp_signature'
  | 'timestamp_chain'
  | 'timestamp_key_usage'
  | 'timestamp_imprint'
  | 'timestamp_time'
  | 'ledger_entry'
  | 'ledger_set'
  | 'ledger_inclusion'
  | 'ledger_checkpoint'
  | 'ledger_body_signature'
  | 'ledger_root_match';

/** One check of a verification, with a human-readable reason. */
export interface VerificationStep {
  /** Which check this is. */
  id: VerificationStepId;
  /** `pass`, `fail`, or `skip` (not checked). */
  status: StepStatus;
  /** What was checked and why it passed, failed or was skipped. */
  detail: string;
}

/** Result of a verification: `ok` is true iff no step failed. */
export interface VerificationReport {
  /** True iff no step has status `fail`. */
  ok: boolean;
  /** Every check, in the order it was made. */
  steps: VerificationStep[];
}

/** Collects steps; `ok` is derived so it can never disagree with the steps. @internal */
export class StepLog {
  readonly steps: VerificationStep[] = [];

  pass(id: VerificationStepId, detail: string): void {
    this.steps.push({ id, status: 'pass', detail });
  }

  fail(id: VerificationStepId, detail: string): void {
    this.steps.push({ id, status: 'fail', detail });
  }

  skip(id: VerificationStepId, detail: string): void {
    this.steps.push({ id, status: 'skip', detail });
  }

  /** Records `pass` or `fail` depending on `ok`. */
  record(id: VerificationStepId, ok: boolean, detail: string): void {
    this.steps.push({ id, status: ok ? 'pass' : 'fail', detail });
  }

  get ok(): boolean {
    return this.steps.every((s) => s.status !== 'fail');
  }

  report(): VerificationReport {
    return { ok: this.ok, steps: [...this.steps] };
  }
}

/** Message of an unknown thrown value, for step details. @internal */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
