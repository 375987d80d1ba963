/**
 * The audit log: every management action with its actor (a member, an API key, the operator),
 * the action, its target, a summary of the change, the client address and the time. Append-only
 * (the table refuses UPDATE, and DELETE of rows younger than the retention period: migration
 * 0150); rows older than AUDIT_RETENTION_DAYS are removed by the retention job.
 */
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import type { Actor } from '../orgs/orgs.service.js';
import type { AccountRepository, AuditEntry } from './accounts.repository.js';

export const AUDIT_RETENTION_DAYS = 400;

export interface AuditRecord {
  orgId: string | null;
  actor: Actor | { type: 'operator' } | { type: 'system' } | { type: 'customer'; id: string };
  action: string;
  target?: { type: string; id: string | null };
  summary: string;
  clientAddress: string | null;
}

export class AuditLog {
  constructor(
    private readonly repo: AccountRepository,
    private readonly clock: Clock,
  ) {}

  async record(entry: AuditRecord): Promise<void> {
    const actor = entry.actor;
    await this.repo.insertAudit({
      id: newId('AUD'),
      orgId: entry.orgId,
      actorType: actor.type,
      actorId: 'id' in actor ? actor.id : null,
      action: entry.action,
      targetType: entry.target?.type ?? null,
      targetId: entry.target?.id ?? null,
      // A summary names what changed, never a secret: callers pass field names and roles, not values.
      summary: entry.summary.slice(0, 500),
      clientAddress: entry.clientAddress,
      createdAt: this.clock.now(),
    });
  }

  list(orgId: string, page: number, size: number): Promise<{ records: AuditEntry[]; total: number }> {
    return this.repo.listAudit(orgId, { offset: (page - 1) * size, limit: size });
  }
}
