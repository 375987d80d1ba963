/**
 * Names buyers see (an organization's display name, a product's name) are one line of text: a
 * control character (CR/LF, tab, NUL, DEL, C1) in one would break a mail client's sender line or a
 * subject into two, so they are refused when set and, for names stored before that rule, replaced
 * by a space when shown (issue 37 §15, §27).
 */
import { validationError } from './errors.js';

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]+/g;

/** Refuses a name with a control character: a clear 400 naming the field. */
export function assertOneLineName(field: string, value: string | null | undefined): void {
  if (typeof value === 'string' && CONTROL.test(value)) throw validationError(`${field} must be one line of text without control characters (line breaks, tabs)`, { field });
}

/** A stored name as shown: each run of control characters becomes one space. */
export const shownName = (value: string): string => value.replace(CONTROLS, ' ').trim();
