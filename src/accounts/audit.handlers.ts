/**
 * The audit trail of the merchant and admin APIs' state changes, whichever door they came
 * through: each handler of a map is wrapped once, at composition, and a successful request that
 * changes something (any method but GET and HEAD) is recorded with its actor (the API key, the
 * member's session, or the operator), the operation, its target and the names of the fields sent
 * (never their values: a summary never holds a secret).
 */
import type { AnyHandler } from '../http/typed-handler.js';
import type { MerchantAuth } from '../orgs/orgs.service.js';
import type { AuditLog } from './audit.service.js';
import { clientAddress } from './console.handlers.js';

const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** Where a request's organization and target are read from when the caller is the operator. */
function targetOf(path: string, params: Record<string, unknown>): { type: string; id: string | null } {
  // `/v1/products/{id}/archive` → products / the id; `/v1/orgs/{id}/products` → orgs / the id.
  const segments = path.split('/').filter(Boolean);
  for (let i = segments.length - 1; i > 0; i -= 1) {
    const match = /^\{(.+)\}$/.exec(segments[i]!);
    if (match) return { type: segments[i - 1]!, id: String(params[match[1]!] ?? '') || null };
  }
  return { type: segments.at(-1) ?? 'api', id: null };
}

/**
 * A telling name for an operation's entry (`product.create`) and the kind of its target; the
 * target's id is the path's `{id}`, or (`idFrom: 'result'`) the first `…Id` of the answer's data
 * other than `orgId` (what a creation made).
 */
export interface AuditAction {
  action: string;
  target: string;
  idFrom?: 'path' | 'result';
}

/** The first `…Id` field of an answer's data other than `orgId`: the id of what was made. */
function madeId(data: Record<string, unknown> | undefined): string | null {
  for (const [key, value] of Object.entries(data ?? {})) {
    if (key !== 'orgId' && key.endsWith('Id') && typeof value === 'string') return value;
  }
  return null;
}

export function audited<M extends object>(
  handlers: M,
  audit: AuditLog,
  options: { door: 'merchant' | 'admin' | 'console'; skip?: ReadonlySet<string>; actions?: Readonly<Record<string, AuditAction>> },
): M {
  const wrapped: Record<string, AnyHandler> = {};
  for (const [operationId, handler] of Object.entries(handlers as Record<string, AnyHandler>)) {
    if (options.skip?.has(operationId)) {
      wrapped[operationId] = handler;
      continue;
    }
    wrapped[operationId] = async (input) => {
      const result = await handler(input);
      const { req } = input;
      if (SAFE_METHODS.has(req.method) || result.status >= 300) return result;
      const path = req.documented?.entry.op.path ?? req.path;
      const params = (input.params ?? {}) as Record<string, unknown>;
      const data = (result.body as { data?: { orgId?: unknown } } | undefined)?.data;
      const named = options.actions?.[operationId];
      const target = named
        ? { type: named.target, id: named.idFrom === 'result' ? madeId(data) : String(params.id ?? '') || null }
        : targetOf(path, params);
      const auth = input.auth as MerchantAuth | undefined;
      const orgId = auth?.orgId ?? (target.type === 'orgs' ? target.id : typeof data?.orgId === 'string' ? data.orgId : null);
      const fields = input.body && typeof input.body === 'object' ? Object.keys(input.body as object) : [];
      try {
        await audit.record({
          orgId,
          actor: auth?.actor ?? { type: 'operator' },
          action: named?.action ?? operationId,
          target,
          summary: `${req.method} ${path}${fields.length > 0 ? ` (fields: ${fields.join(', ')})` : ''}`,
          clientAddress: clientAddress(req),
        });
      } catch (err) {
        // The change is made; a failed audit write is reported, not turned into a failed request.
        req.log.error({ err, operationId }, 'audit log write failed');
      }
      return result;
    };
  }
  return wrapped as M;
}
