import type { Db } from "../db/knex.js";

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

export interface AuditRow {
  id: string;
  at: Date;
  actor_agent_id: string | null;
  action: string;
  subject_type: string;
  subject_id: string;
  request_id: string | null;
  data: Record<string, unknown>;
}

/** The newest audit events of one subject, newest first. */
export async function listAudit(
  q: Db,
  subjectType: string,
  subjectId: string,
  limit: number,
): Promise<AuditRow[]> {
  return q<AuditRow>("audit_events")
    .where({ subject_type: subjectType, subject_id: subjectId })
    .orderBy("id", "desc")
    .limit(limit);
}
