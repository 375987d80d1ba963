/**
 * The one place where an API error becomes what a page shows. A validator's text
 * (`body.permissions must NOT have fewer than 1 items`) is for developers reading the API; the
 * console says the same thing in words about the field. Pure: tested by test/console/error-messages.test.ts.
 */

/** `body.pricingData.unitAmount` → `unit amount`; `query.size` → `size`. */
function fieldName(path: string): string {
  const last = path.replace(/^(request\/)?(body|query|path|params|headers?)[./]?/, '').split(/[./]/).filter(Boolean).pop() ?? '';
  const words = last.replace(/\[\d+\]$/, '').replace(/([a-z0-9])([A-Z])/g, '$1 $2').replaceAll('_', ' ').toLowerCase();
  return words || 'the request';
}

const PATTERNS: Array<[RegExp, (field: string, m: RegExpMatchArray) => string]> = [
  [/must NOT have fewer than (\d+) items?$/, (f, m) => (m[1] === '1' ? `Choose at least one ${f.replace(/s$/, '')}.` : `Choose at least ${m[1]} ${f}.`)],
  [/must NOT have more than (\d+) items?$/, (f, m) => `Choose at most ${m[1]} ${f}.`],
  [/must NOT have fewer than (\d+) characters?$/, (f, m) => (m[1] === '1' ? `Enter a ${f}.` : `The ${f} needs at least ${m[1]} characters.`)],
  [/must NOT have more than (\d+) characters?$/, (f, m) => `The ${f} can be at most ${m[1]} characters long.`],
  [/must be equal to one of the allowed values$|must be equal to constant$/, (f) => `Choose one of the offered values for the ${f}.`],
  [/must match format "?(email)"?$/, (f) => `Enter a valid e-mail address for the ${f}.`],
  [/must match format "?(uri|url)"?$/, (f) => `Enter a full address (https://…) for the ${f}.`],
  [/must match format/, (f) => `The ${f} is not in the expected format.`],
  [/must match pattern/, (f) => `The ${f} contains characters or a shape that is not accepted.`],
  [/must be (integer|number)$/, (f) => `The ${f} must be a number.`],
  [/must be (>=|>) (-?[\d.]+)$/, (f, m) => `The ${f} must be ${m[1] === '>=' ? 'at least' : 'more than'} ${m[2]}.`],
  [/must be (<=|<) (-?[\d.]+)$/, (f, m) => `The ${f} must be ${m[1] === '<=' ? 'at most' : 'less than'} ${m[2]}.`],
  [/must NOT have duplicate items/, (f) => `The ${f} list names something twice.`],
  [/must have required property '([^']+)'$/, (_f, m) => `Fill in the ${fieldName(m[1]!)}.`],
  [/is required$/, (f) => `Fill in the ${f}.`],
];

/** One validator message (`body.name must NOT have fewer than 1 characters`) in words, or undefined when it is not one. */
function humanize(part: string): string | undefined {
  const match = /^(?:request\/)?((?:body|query|path|params|headers?)(?:[./][\w[\]-]+)*)\s+(.*?)(?:\s+\(at [^)]*\))?$/.exec(part.trim());
  if (!match) return undefined;
  const [, path, rest] = match as unknown as [string, string, string];
  const field = fieldName(path);
  if (field === 'the request' && !rest.startsWith('must have required')) return undefined;
  for (const [pattern, say] of PATTERNS) {
    const m = rest.match(pattern);
    if (m) return say(field, m);
  }
  return path.includes('.') ? `The ${field} was not accepted; check it and try again.` : undefined;
}

/** Phrases only the request validator writes (ajv); a service's sentence ("prorationDate must be within …") is not one. */
const VALIDATOR_PHRASE = /\bmust (NOT have |be equal to |match (format|pattern)|have required property|be (integer|number|string|boolean|object|array|null)$|be [<>]=? -?[\d.]+$)/;
const NOT_ACCEPTED = 'Part of what you entered was not accepted; check the form and try again.';

/**
 * What a page shows for an API error: a validator's parts in words (the API joins them with
 * `; `); any other message as it is, since services write theirs for people — a plan change's
 * "prorationDate must be within the last 10 minutes and in the current period; preview again"
 * is shown as written, not replaced by the generic sentence (issue 39).
 */
export function humanErrorMessage(_code: string | undefined, message: string): string {
  const parts = message.split('; ');
  const shown = parts.map((part) => humanize(part) ?? (VALIDATOR_PHRASE.test(part) ? NOT_ACCEPTED : undefined));
  if (shown.every((s) => s === undefined)) return message;
  return [...new Set(shown.map((s, i) => s ?? parts[i]!))].join(' ');
}
