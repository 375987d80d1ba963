/**
 * What the buyer-facing pages read from a request: the urlencoded form of their POSTs and the
 * query string of their links, as plain text fields. Input they cannot read throws (or passes on)
 * PageInputError, which src/checkout/hosted-page-guard.ts renders as a human page.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import express from 'express';

/** Typed like express.urlencoded's middleware, so a route's own path parameters stay typed after it. */
type FormParser = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

/** Input a hosted page refuses: rendered as `status` with this title and message. */
export class PageInputError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
  ) {
    super(message);
    this.name = 'PageInputError';
  }
}

/** C0 controls other than tab, LF and CR, and DEL: no field of these pages holds one (PostgreSQL cannot even store NUL). */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/;

/** A field name as shown on a page: attacker-controlled, so shortened (and escaped by the page). */
export const shownName = (name: string): string => (name.length > 40 ? `${name.slice(0, 40)}…` : name);

/** The first field of a parsed query or form whose name or value holds a control character. */
export function controlCharacterIn(fields: unknown, prefix = ''): string | undefined {
  if (typeof fields === 'string') return CONTROL_CHARACTER.test(fields) ? prefix : undefined;
  if (Array.isArray(fields)) {
    for (const item of fields) {
      const found = controlCharacterIn(item, prefix);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (fields !== null && typeof fields === 'object') {
    for (const [key, value] of Object.entries(fields)) {
      const name = prefix ? `${prefix}[${key}]` : key;
      if (CONTROL_CHARACTER.test(key)) return name;
      const found = controlCharacterIn(value, name);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/**
 * The form parser of a hosted page's POST: urlencoded within these limits (more fields than
 * `parameterLimit` is 413, a larger body 413), then every field once, as plain text without
 * control characters. A repeated field is refused (400 naming it), never read as its first or
 * last value.
 */
export function hostedForm(options: { limit: string; parameterLimit: number }): FormParser {
  const parse = express.urlencoded({ extended: false, limit: options.limit, parameterLimit: options.parameterLimit });
  return (req, res, next) =>
    parse(req, res, (err?: unknown) => {
      if (err) return next(err);
      next(formRefusal(((req as IncomingMessage & { body?: Record<string, unknown> }).body ?? {})));
    });
}

function formRefusal(fields: Record<string, unknown>): PageInputError | undefined {
  for (const [name, value] of Object.entries(fields)) {
    if (Array.isArray(value)) return new PageInputError(400, 'Cannot send this form', `The form field "${shownName(name)}" was sent more than once.`);
    if (typeof value !== 'string') return new PageInputError(400, 'Cannot send this form', `The form field "${shownName(name)}" is not plain text.`);
  }
  const field = controlCharacterIn(fields);
  return field === undefined ? undefined : new PageInputError(400, 'Cannot send this form', `The form field "${shownName(field)}" contains a control character.`);
}
