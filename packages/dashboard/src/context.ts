/** What the views share: the signed-in API, the payload opener, and navigation. */
import type { DashboardApi } from './api.js';
import type { PayloadOpener } from './decrypt.js';

/** Trust material the user pinned in this page (memory only), instead of the server's copy. */
export interface PinnedTrust {
  tsaRootsPem?: string;
  ledgerPublicKeyPem?: string;
}

/** The shared context of one signed-in session. */
export interface DashboardContext {
  api: DashboardApi;
  /** Replaced when the user enters another decryption key. */
  opener: PayloadOpener;
  pinnedTrust: PinnedTrust;
  /** Opens the Story Visualizer on a trace, optionally selecting one of its logs. */
  openTrace: (traceId: string, selectLogId?: string) => void;
  /** Opens one log (its trace when it has one, else the log alone). */
  openLog: (logId: string) => void;
}
