import { createHash } from "node:crypto";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { deleteExpiredIdempotencyKeys, type IdempotencyRow } from "./store/idempotency.js";
import { type InvocationRow, TERMINAL } from "./store/invocations.js";

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** SHA-256 over the operation and its canonical payload (key order does not matter). */
export function fingerprint(operation: string, payload: unknown): string {
  return createHash("sha256").update(operation).update("\n").update(canonical(payload)).digest("hex");
}

/**
 * What a second request with a claimed key gets: 422 when the payload differs, 409 while the first
 * is still running, and the original invocation (to replay) once it has ended or while it awaits a
 * supervisor's approval (the replay is the same 202 awaiting_approval answer).
 */
export function resolveReplay(
  existing: IdempotencyRow,
  print: string,
  invocation: InvocationRow,
): InvocationRow {
  if (existing.fingerprint !== print) {
    throw new AppError("IDEMPOTENCY_KEY_REUSED", "this idempotency key was used with a different payload", {
      invocation_id: existing.invocation_id,
    });
  }
  if (!TERMINAL.includes(invocation.status) && invocation.status !== "awaiting_approval") {
    throw new AppError("IDEMPOTENCY_KEY_IN_USE", "the request with this idempotency key is still running", {
      invocation_id: invocation.id,
      status: invocation.status,
    });
  }
  return invocation;
}

/** Housekeeping: idempotency records past their expiry answer nothing any more. */
export async function purgeExpiredIdempotencyKeys(): Promise<void> {
  await deleteExpiredIdempotencyKeys(db());
}
