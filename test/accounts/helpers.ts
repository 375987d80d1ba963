/** Members of the harness's organizations, signed in to the console through the real doors. */
import type { Response } from 'supertest';
import type { TestContext } from '../harness/context.js';
import type { Role } from '../../src/accounts/roles.js';

export const PASSWORD = 'correct horse battery staple';
export const ORIGIN = 'http://merchant.test';

export interface Member {
  email: string;
  userId: string;
  cookie: string;
  token: string;
  csrf: string;
}

let counter = 0;
export const uniqueEmail = (label: string) => `${label}-${++counter}-${Date.now() % 100000}@example.com`;

/** The session cookie a response set (`name=value`), or undefined. */
export function sessionCookieOf(res: Response): string | undefined {
  const cookies = ([] as string[]).concat((res.headers['set-cookie'] as unknown as string[] | string | undefined) ?? []);
  const line = cookies.find((c) => c.startsWith('__Host-kassa_session='));
  return line?.split(';')[0];
}

export function linkToken(url: string): string {
  return new URL(url).hash.replace(/^#token=/, '');
}

/** The operator invites (admin API), the person accepts (console): a signed-in member. */
export async function signUp(ctx: TestContext, orgId: string, role: Role, email = uniqueEmail(role)): Promise<Member> {
  const invite = await ctx.admin.post(`/v1/orgs/${orgId}/invites`).send({ email, role });
  if (invite.status !== 201) throw new Error(`invite: ${invite.status} ${invite.text}`);
  const accepted = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token: linkToken(invite.body.data.url), password: PASSWORD });
  if (accepted.status !== 200) throw new Error(`accept: ${accepted.status} ${accepted.text}`);
  const cookie = sessionCookieOf(accepted)!;
  return { email, userId: accepted.body.data.user.userId, cookie, token: cookie.split('=')[1]!, csrf: accepted.body.data.csrfToken };
}

export async function signIn(ctx: TestContext, email: string, password = PASSWORD, address?: string): Promise<Response> {
  const req = ctx.merchant.post('/v1/console/sign-in').set('Origin', ORIGIN);
  if (address) req.set('X-Forwarded-For', address);
  return req.send({ email, password });
}

/** A request as the console sends it: the cookie, and for writes the Origin and CSRF token. */
export function as(member: Pick<Member, 'cookie' | 'csrf'>, req: import('supertest').Test): import('supertest').Test {
  req.set('Cookie', member.cookie);
  if (!['GET', 'HEAD'].includes(req.method)) req.set('Origin', ORIGIN).set('X-CSRF-Token', member.csrf);
  return req;
}
