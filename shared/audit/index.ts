// The audit context's public surface: the append-only record of who changed what (audit_events).
// Every context that changes money, keys, listings or custody writes its row here, in its own
// transaction. Depends on no context.

export { listAudit, recordAudit } from "./store.js";
