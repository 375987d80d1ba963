/**
 * Issue 37 §28: a buyer told "Your refund is on its way" hears about it when that refund fails
 * later (Stripe's refund.failed): an e-mail, and the portal's order list and receipt say so.
 */
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStripeContext, type StripeContext } from '../processors/stripe-context.js';
import { startSmtp } from './smtp.js';

let smtp: Awaited<ReturnType<typeof startSmtp>>;
let s: StripeContext;
beforeAll(async () => {
  smtp = await startSmtp();
  s = await createStripeContext({ SMTP_URL: `${smtp.url}/?ignoreTLS=true`, SMTP_FROM: 'receipts@kassa.test' });
});
afterAll(async () => {
  await s?.close();
  await smtp?.close();
});


describe('a refund that fails later', () => {
  it('is e-mailed to the buyer once, and the portal shows it on the order and its receipt', async () => {
    const { orderId, intentId } = await s.paidOrder('refund-later@example.com');
    expect((await s.ctx.admin.post(`/v1/orders/${orderId}/refund`).send({ amount: 500 })).status).toBe(200);
    const made = [...s.stripe.refunds.values()].find((r) => r.payment_intent === intentId)!;
    s.stripe.failRefund(made.id, 'expired_or_canceled_card');
    const failed = s.stripe.lastEvent('refund.failed', made.id);
    expect((await s.deliver(failed)).body.outcome).toBe('applied');
    expect((await s.deliver({ ...failed, id: `${failed.id}_again` })).body.outcome).toBe('ignored');

    const emails = s.ctx.services.modules.buyerEmails!.emails;
    while (await emails.sendDue()) {
      // next batch
    }
    const mine = smtp.received.filter((m) => m.to.includes('refund-later@example.com'));
    expect(mine.map((m) => m.subject)).toEqual(['Your receipt from Org A', 'Org A refunded €5.00', 'Ebook: your refund of €5.00 did not go through']);
    const last = mine.at(-1)!.raw;
    expect(last).toContain('Your refund did not go through');
    expect(last).toContain('contact Org A');

    const customerId = (await s.readOrder(orderId)).customerId as string;
    const link = (await s.ctx.merchant.post('/v1/customer-portal-sessions').set('X-API-Key', s.ctx.orgA.apiKey).send({ customerId })).body.data.url as string;
    const http = supertest(s.ctx.apps.merchant);
    const entered = await http.post(new URL(link).pathname).type('form').send({});
    const cookie = [entered.headers['set-cookie']].flat().find((c) => c?.startsWith('__Host-kassa_portal='))!.split(';')[0]!;
    const home = await http.get('/portal').set('Cookie', cookie);
    expect(home.text).toContain('Paid; a refund of €5.00 did not go through');
    const receipt = await http.get(`/portal/orders/${orderId}`).set('Cookie', cookie);
    expect(receipt.text).toMatch(/data-testid="refund-failed">€5.00 did not reach you/);
  });
});
