/**
 * Buyer e-mails (issue 28 §2) against real SMTP servers the test starts (smtp-server): what each
 * state change sends (receipt, subscription started, renewal succeeded / failed, canceled, ended,
 * refund), HTML + text parts, the merchant's name as sender, the portal link and no bearer token;
 * the outbox's guarantees (one e-mail per fact, none for a rolled-back transaction, a crashed
 * worker's claim retried after its lease with the same Message-ID); a server that refuses (5xx
 * fails, 4xx retries) and one that is down (retried); the portal's e-mailed sign-in link.
 */
import supertest from 'supertest';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createCommerceUnitOfWork } from '../../src/services.js';
import { createBuyerEmailsModule } from '../../src/buyer-emails/index.js';
import { createLogger } from '../../src/kernel/logger.js';
import { startSmtp, type ReceivedMail as Received } from './smtp.js';

let smtp: Awaited<ReturnType<typeof startSmtp>>;
let ctx: TestContext;
let subPrice: string;
let oneTimePrice: string;
let n = 0;

beforeAll(async () => {
  smtp = await startSmtp();
  ctx = await createTestContext({ env: { SMTP_URL: `${smtp.url}/?ignoreTLS=true`, SMTP_FROM: 'receipts@kassa.test' } });
  const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Pro plan' });
  subPrice = (await ctx.services.catalog.createPrice(product.id, { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 1 })).id;
  const ebook = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Ebook' });
  oneTimePrice = (await ctx.services.catalog.createPrice(ebook.id, { amount: 1250, currency: 'USD' })).id;
});
afterAll(async () => {
  await ctx?.close();
  await smtp?.close();
});
beforeEach(() => {
  smtp.received.length = 0;
});

const emails = () => ctx.services.modules.buyerEmails!.emails;
const db = () => ctx.testDb.database.db;

async function buy(email: string, pricingId: string, card = '4242424242424242') {
  const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `mail-${++n}`).send({ pricingId, customerEmail: email });
  const path = new URL(created.body.data.url).pathname;
  expect((await supertest(ctx.apps.merchant).post(`${path}/pay`).type('form').send({ cardNumber: card, expiry: '12/30', cvc: '123' })).status).toBe(303);
  const order = await db()('orders').where({ checkout_session_id: created.body.data.id }).first();
  return { orderId: order.id as string, subscriptionId: order.subscription_id as string | null };
}

/** Runs the sending job until nothing is due; the messages it sent. */
async function send(): Promise<Received[]> {
  while (await emails().sendDue()) {
    // next batch
  }
  return [...smtp.received];
}

const subjectOf = (m: Received) => m.subject;

describe('what each change sends', () => {
  it('a one-time purchase: a receipt with text and HTML parts, from the merchant, with the portal link and no token', async () => {
    const { orderId } = await buy('receipt@example.com', oneTimePrice);
    const [mail, ...more] = await send();
    expect(more).toEqual([]);
    expect(mail!.to).toEqual(['receipt@example.com']);
    expect(mail!.from).toBe('receipts@kassa.test');
    expect(mail!.raw).toMatch(/^From: Org A <receipts@kassa\.test>$/m);
    expect(subjectOf(mail!)).toBe('Your receipt from Org A');
    expect(mail!.raw).toMatch(/Content-Type: text\/plain/);
    expect(mail!.raw).toMatch(/Content-Type: text\/html/);
    expect(mail!.raw).toContain('$12.50');
    expect(mail!.raw).toContain(orderId);
    expect(mail!.raw).toContain(`http://merchant.test/portal/o/${ctx.orgA.orgId}`);
    expect(mail!.raw).not.toContain('/portal/enter/');
    expect(mail!.raw).not.toContain('/subscriptions/manage/');
    expect(mail!.raw).toMatch(/^Message-ID: <EML_[0-9A-Za-z]{24}@kassa\.test>$/m);
    expect((await db()('buyer_emails').where({ order_id: orderId }).first()).status).toBe('sent');
  });

  it('a subscription: started, renewed, canceled at period end, kept (no e-mail), canceled again, ended', async () => {
    ctx.clock.set('2026-11-22T09:00:00.000Z');
    const { subscriptionId } = await buy('life@example.com', subPrice);
    expect((await send()).map(subjectOf)).toEqual(['Your Pro plan subscription with Org A']);
    smtp.received.length = 0;

    ctx.clock.set('2026-12-22T09:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const [renewed] = await send();
    expect(subjectOf(renewed!)).toBe('Pro plan: renewed');
    expect(renewed!.raw).toContain('the next renewal is on 22 January 2027');
    smtp.received.length = 0;

    const token = (await db()('subscriptions').where({ id: subscriptionId }).first()).manage_token;
    await supertest(ctx.apps.merchant).post(`/subscriptions/manage/${token}/cancel`).type('form').send({ confirm: 'yes' });
    await supertest(ctx.apps.merchant).post(`/subscriptions/manage/${token}/cancel`).type('form').send({ confirm: 'yes' }); // already scheduled: no second e-mail
    const [canceled, ...none] = await send();
    expect(none).toEqual([]);
    expect(subjectOf(canceled!)).toBe('Pro plan: canceled');
    expect(canceled!.raw).toContain('You keep access until 22 January 2027');
    smtp.received.length = 0;

    await supertest(ctx.apps.merchant).post(`/subscriptions/manage/${token}/resume`).type('form').send({});
    expect(await send()).toEqual([]);
    ctx.clock.advance(1000);
    await supertest(ctx.apps.merchant).post(`/subscriptions/manage/${token}/cancel`).type('form').send({ confirm: 'yes' });
    expect((await send()).map(subjectOf)).toEqual(['Pro plan: canceled']);
    smtp.received.length = 0;

    ctx.clock.set('2027-01-22T09:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const [ended] = await send();
    expect(subjectOf(ended!)).toBe('Pro plan: your subscription has ended');
  });

  it('cancel, keep and cancel again within one second: two "canceled" e-mails, one per change (issue 37 §29)', async () => {
    // The clock does not move: both cancellations carry the same canceledAt, as Stripe's whole-second canceled_at does.
    const { subscriptionId } = await buy('twice@example.com', subPrice);
    await send();
    smtp.received.length = 0;
    const token = (await db()('subscriptions').where({ id: subscriptionId }).first()).manage_token;
    const manage = (action: string) => supertest(ctx.apps.merchant).post(`/subscriptions/manage/${token}/${action}`).type('form').send({ confirm: 'yes' });
    await manage('cancel');
    await manage('resume');
    await manage('cancel');
    await manage('cancel'); // already scheduled: no change, no e-mail
    expect((await send()).map(subjectOf)).toEqual(['Pro plan: canceled', 'Pro plan: canceled']);
    // Ended here, so the later tests' renewal runs do not end it.
    await ctx.services.subscriptions.cancel(subscriptionId!, { atPeriodEnd: false });
    await send();
  });

  it('a failed renewal says what to do', async () => {
    ctx.clock.set('2027-02-01T09:00:00.000Z');
    await buy('declines@example.com', subPrice, '4000000000000341');
    await send();
    smtp.received.length = 0;
    ctx.clock.set('2027-03-01T09:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    const [failed, ...more] = await send();
    expect(more).toEqual([]);
    expect(failed!.to).toEqual(['declines@example.com']);
    expect(subjectOf(failed!)).toBe('Pro plan: your payment did not go through');
    expect(failed!.raw).toContain('What to do:');
    // Dunning retries of the same renewal do not repeat it.
    ctx.clock.set('2027-03-02T09:00:00.000Z');
    await ctx.services.subscriptions.processDue();
    expect((await send()).length).toBe(1);
  });

  it('a refund, partial then the rest: one e-mail per refund with its amount', async () => {
    const { orderId } = await buy('refund@example.com', oneTimePrice);
    await send();
    smtp.received.length = 0;
    expect((await ctx.admin.post(`/v1/orders/${orderId}/refund`).send({ amount: 250 })).status).toBe(200);
    expect((await ctx.admin.post(`/v1/orders/${orderId}/refund`).send({})).status).toBe(200);
    const sent = await send();
    expect(sent.map(subjectOf)).toEqual(['Org A refunded $2.50', 'Org A refunded $10.00']);
  });
});

describe('the outbox', () => {
  it('is sent by the worker job buyer-emails, registered only with SMTP_URL', async () => {
    const { workerJobs } = await import('../../src/jobs.js');
    expect(workerJobs(ctx.deps).filter((job) => job.name === 'buyer-emails').map((job) => job.intervalMs)).toEqual([1000]);
  });

  it('queues nothing for a rolled-back transaction', async () => {
    const { orderId } = await buy('rollback@example.com', oneTimePrice);
    await send();
    const before = await db()('buyer_emails').count<{ count: number }[]>({ count: '*' }).first();
    const uow = createCommerceUnitOfWork(db(), { buyerEmails: true });
    const order = (await uow.stores.orders.find(ctx.orgA.orgId, orderId))!;
    await expect(
      uow.transaction(async (stores) => {
        await stores.notifyBuyerOfRefund({ ...order, amountRefundedCents: 100 }, 100, ctx.clock.now());
        throw new Error('the refund failed after all');
      }),
    ).rejects.toThrow('the refund failed after all');
    expect(await db()('buyer_emails').count<{ count: number }[]>({ count: '*' }).first()).toEqual(before);
  });

  it("a crashed worker's claim is sent once its lease ends, with the same Message-ID; two workers never send one e-mail twice", async () => {
    await buy('crash@example.com', oneTimePrice);
    await buy('crash2@example.com', oneTimePrice);
    await buy('crash3@example.com', oneTimePrice);
    // A worker claims everything due, then dies before sending.
    const repo = (await import('../../src/buyer-emails/buyer-email.repository.js')).KnexBuyerEmailRepository;
    const claimed = await new repo(db()).claimDue(ctx.clock.now(), 120_000, 1);
    expect(claimed).toHaveLength(1);
    // Two workers at once send the rest, each e-mail once.
    await Promise.all([emails().sendDue(), emails().sendDue()]);
    const first = smtp.received.map((m) => /^Message-ID: (.*)$/m.exec(m.raw)?.[1]);
    expect(new Set(first).size).toBe(first.length);
    expect(smtp.received.map((m) => m.to[0])).not.toContain(claimed[0]!.to);
    ctx.clock.advance(120_001);
    await send();
    const crashed = smtp.received.filter((m) => m.to[0] === claimed[0]!.to);
    expect(crashed).toHaveLength(1);
    expect(crashed[0]!.raw).toContain(`Message-ID: <${claimed[0]!.id}@kassa.test>`);
  });
});

describe('servers that refuse or are down', () => {
  const moduleOn = (url: string) =>
    createBuyerEmailsModule({
      db: db(),
      uow: createCommerceUnitOfWork(db()),
      smtp: { url, from: 'receipts@kassa.test' },
      merchants: ctx.services.orgs,
      portalUrlOf: (orgId) => `http://merchant.test/portal/o/${orgId}`,
      clock: ctx.clock,
      logger: createLogger({ level: 'silent' }),
    }).emails;

  it('a permanent refusal (550) fails the e-mail at once; a temporary one (451) is retried later', async () => {
    const refusing = await startSmtp({ refuse: { code: 550, message: 'No such user here' } });
    const busy = await startSmtp({ refuse: { code: 451, message: 'Try again later' } });
    try {
      const { orderId } = await buy('refused@example.com', oneTimePrice);
      await moduleOn(`${refusing.url}/?ignoreTLS=true`).sendDue();
      const row = await db()('buyer_emails').where({ order_id: orderId }).first();
      expect(row).toMatchObject({ status: 'failed', attempts: 1 });
      expect(row.last_error).toMatch(/^550/);

      const second = await buy('busy@example.com', oneTimePrice);
      await moduleOn(`${busy.url}/?ignoreTLS=true`).sendDue();
      const retry = await db()('buyer_emails').where({ order_id: second.orderId }).first();
      expect(retry).toMatchObject({ status: 'pending', attempts: 1 });
      expect(new Date(retry.next_attempt_at).getTime()).toBe(ctx.clock.now().getTime() + 60_000);
      ctx.clock.advance(60_000);
      await send();
      expect((await db()('buyer_emails').where({ order_id: second.orderId }).first()).status).toBe('sent');
    } finally {
      await refusing.close();
      await busy.close();
    }
  });

  it('a server that is down: the e-mail waits and goes out once it is back', async () => {
    const down = await startSmtp();
    const downUrl = down.url;
    await down.close();
    const { orderId } = await buy('down@example.com', oneTimePrice);
    await moduleOn(`${downUrl}/?ignoreTLS=true`).sendDue();
    const row = await db()('buyer_emails').where({ order_id: orderId }).first();
    expect(row).toMatchObject({ status: 'pending', attempts: 1 });
    expect(row.last_error).toMatch(/ECONNECTION|ECONNREFUSED|ESOCKET/);
    ctx.clock.advance(60_000);
    await send();
    expect((await db()('buyer_emails').where({ order_id: orderId }).first()).status).toBe('sent');
  });
});

describe("the portal's e-mailed sign-in link", () => {
  it('goes only to a customer of this merchant, works once, and opens their portal', async () => {
    await buy('signin@example.com', oneTimePrice);
    await send();
    smtp.received.length = 0;
    const http = supertest(ctx.apps.merchant);
    const page = await http.get(`/portal/o/${ctx.orgA.orgId}`);
    expect(page.text).toContain('E-mail me a link');
    const unknown = await http.post(`/portal/o/${ctx.orgA.orgId}`).type('form').send({ email: 'stranger@example.com' });
    const known = await http.post(`/portal/o/${ctx.orgA.orgId}`).type('form').send({ email: 'signin@example.com' });
    expect(unknown.status).toBe(200);
    expect(known.status).toBe(200);
    expect(known.text.replace('signin@example.com', 'X')).toBe(unknown.text.replace('stranger@example.com', 'X'));
    await expect.poll(() => smtp.received.length).toBeGreaterThan(0);
    expect(smtp.received).toHaveLength(1);
    expect(smtp.received[0]!.to).toEqual(['signin@example.com']);
    const link = /http:\/\/merchant\.test(\/portal\/enter\/[0-9A-Za-z]{32})/.exec(smtp.received[0]!.raw)?.[1];
    expect(link).toBeDefined();
    const entered = await http.post(link!).type('form').send({});
    expect(entered.status).toBe(303);
    const cookie = [entered.headers['set-cookie']].flat()[0]!.split(';')[0]!;
    expect((await http.get('/portal').set('Cookie', cookie)).text).toContain('Signed in as signin@example.com');
    expect((await http.post(link!).type('form').send({})).status).toBe(410);
    // Organization B's sign-in page knows nothing of A's customer.
    await http.post(`/portal/o/${ctx.orgB.orgId}`).type('form').send({ email: 'signin@example.com' });
    await new Promise((r) => setTimeout(r, 300));
    expect(smtp.received).toHaveLength(1);
  });

  it('are bounded per recipient: at most 5 an hour, whatever letter case is typed, with the same answer (issue 37 §15)', async () => {
    await buy('bounded@example.com', oneTimePrice);
    await send();
    smtp.received.length = 0;
    const http = supertest(ctx.apps.merchant);
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) {
      ctx.clock.advance(61_000); // a new minute of the pages' per-address write limit
      const typed = i % 2 ? 'BOUNDED@example.com' : 'bounded@example.com';
      const res = await http.post(`/portal/o/${ctx.orgA.orgId}`).type('form').send({ email: typed });
      expect(res.status).toBe(200);
      answers.push(res.text.replace(typed, 'X'));
    }
    expect(new Set(answers).size).toBe(1);
    // The five are sent after the answers: wait for them (a loaded machine takes its time), then
    // give a sixth the time to show up before counting.
    const toBounded = () => smtp.received.filter((m) => m.to.includes('bounded@example.com')).length;
    await expect.poll(toBounded).toBeGreaterThanOrEqual(5);
    await new Promise((r) => setTimeout(r, 1000));
    expect(toBounded()).toBe(5);
    ctx.clock.advance(60 * 60_000);
    await http.post(`/portal/o/${ctx.orgA.orgId}`).type('form').send({ email: 'bounded@example.com' });
    await expect.poll(() => smtp.received.length).toBeGreaterThanOrEqual(6);
    expect(smtp.received).toHaveLength(6);
  });
});
