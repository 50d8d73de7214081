/**
 * The predicate the core suites pass to assert.throws: a CoreError carrying the given stable code
 * (docs/errors.md), so a test names the code it expects rather than a message.
 */
import { CoreError } from '../../src/index.js';

/** True for a CoreError whose `code` is `code`. */
export const isCode = (code: string) => (e: unknown) => e instanceof CoreError && e.code === code;
