/** The console's one mapping from API errors to page text (web/console/shared/error-messages.ts): no validator text on a page. */
import { describe, expect, it } from 'vitest';
import { humanErrorMessage } from '../../web/console/shared/error-messages.js';

describe('humanErrorMessage', () => {
  it('says an empty permission list in words (issue 37, item 16)', () => {
    const shown = humanErrorMessage('VALIDATION_ERROR', 'body.permissions must NOT have fewer than 1 items');
    expect(shown).toBe('Choose at least one permission.');
    expect(shown).not.toMatch(/body\.|must NOT/);
  });

  it('maps the validator phrases the console can meet, every part of a joined message', () => {
    const cases: Array<[string, string]> = [
      ['body.name must NOT have fewer than 1 characters', 'Enter a name.'],
      ['body.name must NOT have more than 100 characters', 'The name can be at most 100 characters long.'],
      ['body.url must match format "uri"', 'Enter a full address (https://…) for the url.'],
      ['body.email must match format "email"', 'Enter a valid e-mail address for the email.'],
      ['body.role must be equal to one of the allowed values', 'Choose one of the offered values for the role.'],
      ['body.pricingData.unitAmount must be >= 1', 'The unit amount must be at least 1.'],
      ["request/body must NOT have additional properties: 'flexibleAmount' (at body.pricingData)", 'Part of what you entered was not accepted; check the form and try again.'],
      ['body must have required property \'name\'', 'Fill in the name.'],
      ['the Idempotency-Key header is required', 'the Idempotency-Key header is required'],
    ];
    for (const [raw, words] of cases) expect(humanErrorMessage('VALIDATION_ERROR', raw), raw).toBe(words);
    expect(humanErrorMessage('VALIDATION_ERROR', 'body.name must NOT have fewer than 1 characters; body.permissions must NOT have fewer than 1 items')).toBe('Enter a name. Choose at least one permission.');
  });

  it('shows a plan change refusal as the API wrote it, not the generic sentence (issue 39; regression)', () => {
    // Before: "Part of what you entered was not accepted; check the form and try again. preview again"
    const refusals = [
      'prorationDate must be within the last 10 minutes and in the current period; preview again',
      'quantity must be an integer from 1 to 10000',
      'effective: a downgrade takes effect at the period end (Kassa keeps no credit balance for unused time)',
      'priceId: the subscription cannot move to this price: its billing interval differs from the subscription’s',
    ];
    for (const message of refusals) expect(humanErrorMessage('VALIDATION_ERROR', message), message).toBe(message);
    expect(humanErrorMessage('CONFLICT', 'The subscription changed since the preview: this change now costs 1615 (not 1000); nothing was charged. Preview again.')).toContain('now costs 1615');
    // The validator's own text still becomes words.
    expect(humanErrorMessage('VALIDATION_ERROR', 'body.quantity must be >= 1')).toBe('The quantity must be at least 1.');
  });

  it('keeps the messages written for people', () => {
    expect(humanErrorMessage('FORBIDDEN', 'The role "viewer" cannot give a key the permission(s) "orders:read"')).toBe('The role "viewer" cannot give a key the permission(s) "orders:read"');
    expect(humanErrorMessage('CONFLICT', 'The order is already fully refunded')).toBe('The order is already fully refunded');
  });
});
