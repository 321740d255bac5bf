import { listAudit, recordAudit } from "../../audit/index.js";
import { db } from "../../db/knex.js";
import { availability, readGate } from "./availability.js";
import { type CustodyState, lockCustody, writeCustody } from "./store.js";

// The operator's custody switch (docs/payments.md "The paid-execution gate"): freezing stops every new paid
// action on every process at once — the gate reads it from the database on each request and paid holds
// re-check it under a lock in their own transaction. Every request to change it is audit-logged.

const SUBJECT = { type: "platform_settings", id: "custody" } as const;

function custodyView(c: CustodyState) {
  return {
    frozen: c.frozen,
    reason: c.reason,
    updated_at: c.updated_at.toISOString(),
    updated_by: c.updated_by,
  };
}

/** GET /api/admin/custody: the switch, the gate it feeds, and its recent audit trail. */
export async function custodyStatus() {
  const gate = await readGate();
  const audit = await listAudit(db(), SUBJECT.type, SUBJECT.id, 20);
  return {
    custody: gate.custody ? custodyView(gate.custody) : null,
    paid_execution: gate.enabled ? "enabled" : "temporarily_unavailable",
    reason: gate.reason,
    rail: gate.rail,
    availability: await availability(gate),
    audit: audit.map((a) => ({
      at: a.at.toISOString(),
      action: a.action,
      request_id: a.request_id,
      data: a.data,
    })),
  };
}

/** Freezes or unfreezes custody under a row lock, and records who asked, why and what changed. */
export async function setCustody(frozen: boolean, reason: string, requestId: string) {
  await db().transaction(async (trx) => {
    const before = await lockCustody(trx);
    const after = await writeCustody(trx, { frozen, reason }, `admin:${requestId}`);
    await recordAudit(trx, {
      action: frozen ? "custody.freeze" : "custody.unfreeze",
      subjectType: SUBJECT.type,
      subjectId: SUBJECT.id,
      requestId,
      data: {
        reason,
        changed: before.frozen !== after.frozen,
        before: custodyView(before),
        after: custodyView(after),
      },
    });
  });
  return custodyStatus();
}
