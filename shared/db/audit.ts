import type { Db } from "./knex.js";

export interface AuditEvent {
  actorAgentId?: string | null;
  action: string;
  subjectType: string;
  subjectId: string;
  requestId?: string;
  data?: Record<string, unknown>;
}

export async function recordAudit(q: Db, event: AuditEvent): Promise<void> {
  await q("audit_events").insert({
    actor_agent_id: event.actorAgentId ?? null,
    action: event.action,
    subject_type: event.subjectType,
    subject_id: event.subjectId,
    request_id: event.requestId ?? null,
    data: JSON.stringify(event.data ?? {}),
  });
}
