import { createHash, randomUUID } from "node:crypto";
import { findListing } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError, validationError } from "../errors.js";
import { assertWithinSpendLimits, type Principal } from "../identity/index.js";
import { formatUsdc } from "../kernel/money.js";
import { logger } from "../log.js";
import { assertCustodyOpen, assertPaidExecutionEnabled, retryTransient } from "../money/index.js";
import { checkUrlRules } from "../net/url-policy.js";
import { markJobSent } from "../outbox/index.js";
import { enqueue } from "../queues.js";
import { buildAttestation, signAttestation } from "./attestations.js";
import { captureForOrder, holdForOrder, releaseForOrder } from "./money.js";
import { runProbe } from "./probes/index.js";
import { findAttestationOfOrder, insertAttestation } from "./store/attestations.js";
import {
  completeOrder,
  findOrder,
  findOrderByKey,
  insertOrderWithJob,
  listStaleOrderIds,
  lockOrder,
  markOrderNotRun,
  markOrderRunning,
  type NewOrder,
  type OrderRow,
  type Protocol,
} from "./store/orders.js";
import { redactTarget, VERIFICATION_PRICE_MICROS } from "./terms.js";

// Verification orders (docs/verification.md "Orders"): created with their hold and outbox row in one
// transaction behind the paid-execution gate, probed by the verification-probes worker, settled with the
// attestation in one transaction. An order is read by its buyer or an admin; anyone else gets 404.

export interface OrderRequest {
  target: string;
  protocol: Protocol;
  listing_id?: string;
}

export interface OrderSubmission {
  order: OrderRow;
  replayed: boolean;
}

/** Who reads an order: its buyer's principal, or the operator. */
export type OrderReader = { agentId: string } | { admin: true };

const notFound = (orderId: string) =>
  new AppError("NOT_FOUND", "no verification order with this id for this caller", { order_id: orderId });

/** A target must be an absolute http(s) URL without credentials on a host safe fetch may call. */
function checkTarget(target: string): string {
  let parsed: URL;
  try {
    parsed = new URL(target);
  } catch {
    throw validationError("target is not an absolute URL", [{ path: "/target", message: "must be a URL" }]);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw validationError("target must use http or https", [{ path: "/target", message: "must be http(s)" }]);
  if (parsed.username || parsed.password)
    throw validationError("target must not carry credentials", [
      { path: "/target", message: "userinfo is not allowed: probes never send credentials" },
    ]);
  try {
    checkUrlRules(parsed);
  } catch (error) {
    throw validationError("target names a host probes may not call", [
      { path: "/target", message: (error as Error).message },
    ]);
  }
  return parsed.toString();
}

function fingerprintOf(request: Record<string, unknown>): string {
  const ordered = Object.keys(request)
    .sort()
    .map((k) => [k, request[k] ?? null]);
  return createHash("sha256").update(JSON.stringify(ordered)).digest("hex");
}

async function insertPaidOrder(row: NewOrder, route: string): Promise<OrderRow> {
  return retryTransient(() =>
    db().transaction(async (trx) => {
      await assertCustodyOpen(trx);
      const order = await insertOrderWithJob(trx, row);
      await holdForOrder(trx, order, route);
      return order;
    }),
  );
}

/** A key seen before: the same request replays its order; a different one is refused. */
async function replayed(
  buyerAgentId: string,
  key: string,
  fingerprint: string,
): Promise<OrderRow | undefined> {
  const existing = await findOrderByKey(db(), buyerAgentId, key);
  if (!existing) return undefined;
  if (existing.fingerprint !== fingerprint)
    throw new AppError("IDEMPOTENCY_KEY_REUSED", "this idempotency key was used with a different request", {
      order_id: existing.id,
    });
  return existing;
}

const isKeyConflict = (error: unknown) =>
  (error as { code?: string; constraint?: string }).code === "23505" &&
  (error as { constraint?: string }).constraint === "verification_orders_idempotency_idx";

async function submitOrder(
  principal: Principal,
  fields: Pick<NewOrder, "target_url" | "protocol" | "listing_id" | "rerun_of">,
  idempotencyKey: string | undefined,
  route: string,
  requestId: string,
): Promise<OrderSubmission> {
  const fingerprint = fingerprintOf({ route, ...fields });
  if (idempotencyKey) {
    const earlier = await replayed(principal.agentId, idempotencyKey, fingerprint);
    if (earlier) return { order: earlier, replayed: true };
  }
  // The key's per-call limit (and a daily cap smaller than one order) before any charge: 429.
  await assertWithinSpendLimits(principal, VERIFICATION_PRICE_MICROS);
  // The gate before any hold: 503 with the reason when paid execution is off (docs/payments.md).
  await assertPaidExecutionEnabled();
  const row: NewOrder = {
    id: randomUUID(),
    buyer_agent_id: principal.agentId,
    api_key_id: principal.apiKeyId,
    ...fields,
    subscription_id: null,
    idempotency_key: idempotencyKey ?? null,
    fingerprint,
    price_micros: VERIFICATION_PRICE_MICROS.toString(),
  };
  let order: OrderRow;
  try {
    order = await insertPaidOrder(row, route);
  } catch (error) {
    if (!idempotencyKey || !isKeyConflict(error)) throw error;
    const earlier = await replayed(principal.agentId, idempotencyKey, fingerprint);
    if (!earlier) throw error;
    return { order: earlier, replayed: true };
  }
  await enqueueProbe(order.id, requestId);
  return { order, replayed: false };
}

/** Enqueues a committed order's probe; when Redis fails the outbox sweeper sends it later. */
export async function enqueueProbe(orderId: string, requestId: string | null): Promise<void> {
  try {
    await enqueue("verification-probes", orderId, { order_id: orderId }, requestId ?? undefined);
    markJobSent("verification-probes", orderId);
  } catch (err) {
    logger().warn(
      { err, request_id: requestId, order_id: orderId },
      "enqueue failed; the sweeper will send it",
    );
  }
}

/** POST /api/verification/orders: 5 USDC held, the probe enqueued. */
export async function createOrder(
  principal: Principal,
  request: OrderRequest,
  idempotencyKey: string | undefined,
  requestId: string,
): Promise<OrderSubmission> {
  const target = checkTarget(request.target);
  if (request.listing_id && !(await findListing(db(), request.listing_id)))
    throw new AppError("LISTING_NOT_FOUND", "no listing with this id", { listing_id: request.listing_id });
  return submitOrder(
    principal,
    {
      target_url: target,
      protocol: request.protocol,
      listing_id: request.listing_id ?? null,
      rerun_of: null,
    },
    idempotencyKey,
    "verification_order",
    requestId,
  );
}

/** POST /api/verification/orders/:id/rerun: the buyer pays again; a new attestation, the old one kept. */
export async function rerunOrder(
  principal: Principal,
  orderId: string,
  idempotencyKey: string | undefined,
  requestId: string,
): Promise<OrderSubmission> {
  const original = await readOwnOrder(principal.agentId, orderId);
  return submitOrder(
    principal,
    {
      target_url: original.target_url,
      protocol: original.protocol,
      listing_id: original.listing_id,
      rerun_of: original.id,
    },
    idempotencyKey,
    "verification_rerun",
    requestId,
  );
}

const isUuid = (id: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id);

/** The buyer's own order; anyone else's (or none) is the same 404, so ids cannot be probed. */
export async function readOwnOrder(agentId: string, orderId: string): Promise<OrderRow> {
  const order = isUuid(orderId) ? await findOrder(db(), orderId) : undefined;
  if (!order || order.buyer_agent_id !== agentId) throw notFound(orderId);
  return order;
}

/** An order for its buyer or an admin (interface-spec Authentication rule 7). */
export async function readOrder(reader: OrderReader, orderId: string): Promise<OrderRow> {
  if ("agentId" in reader) return readOwnOrder(reader.agentId, orderId);
  const order = isUuid(orderId) ? await findOrder(db(), orderId) : undefined;
  if (!order) throw notFound(orderId);
  return order;
}

/** The order as its buyer sees it: full target, verdict, checks, attestation link and the money. */
export async function orderView(order: OrderRow) {
  const base = getConfig().publicBaseUrl;
  const attestation = await findAttestationOfOrder(db(), order.id);
  const price = BigInt(order.price_micros);
  return {
    order_id: order.id,
    status: order.status,
    target: order.target_url,
    protocol: order.protocol,
    listing_id: order.listing_id,
    rerun_of: order.rerun_of,
    subscription_id: order.subscription_id,
    verdict: order.verdict,
    checks: order.checks,
    failure_reason: order.failure_reason,
    attestation_id: attestation?.id ?? null,
    attestation_url: attestation ? `${base}/api/verification/attestations/${attestation.id}` : null,
    status_url: `${base}/api/verification/orders/${order.id}`,
    payment: {
      currency: "USDC" as const,
      price_usdc: formatUsdc(price),
      state: order.charge_state,
      charged_usdc: formatUsdc(order.charge_state === "captured" ? price : 0n),
      refunded_usdc: formatUsdc(order.charge_state === "released" ? price : 0n),
      paid_to: "platform_revenue" as const,
      target_paid: false as const,
    },
    created_at: order.created_at.toISOString(),
    completed_at: order.completed_at?.toISOString() ?? null,
  };
}

export type ProcessOutcome = { status: "completed" | "not_run" | "already_settled"; attestation_id?: string };

/**
 * The verification-probes job: probe the target (read only, through safe fetch), sign the attestation,
 * then in one transaction store it, complete the order and capture the hold. A second delivery finds the
 * order settled and does nothing. A throw (our fault: e.g. no signing key) is retried by the queue; when
 * the retries are spent the worker calls abandonOrder, which releases the hold.
 */
export async function processOrder(payload: { order_id: string }): Promise<ProcessOutcome> {
  const order = await findOrder(db(), payload.order_id);
  if (!order) throw new Error(`verification order ${payload.order_id} does not exist`);
  if (order.status === "completed" || order.status === "not_run") return { status: "already_settled" };
  await markOrderRunning(db(), order.id);
  const listing = order.listing_id ? await findListing(db(), order.listing_id) : undefined;
  const outputSchema =
    listing?.output_schema && order.protocol === "http-json"
      ? { listingId: listing.id, schema: listing.output_schema as Record<string, unknown> }
      : null;
  const result = await runProbe(order.protocol, { orderId: order.id, url: order.target_url, outputSchema });
  const attestationId = randomUUID();
  const observedAt = new Date();
  const attestation = buildAttestation({
    attestationId,
    orderId: order.id,
    target: redactTarget(order.target_url),
    protocol: order.protocol,
    verdict: result.verdict,
    checks: result.checks,
    observedAt,
  });
  const signed = await signAttestation(attestation);
  return retryTransient(() =>
    db().transaction(async (trx): Promise<ProcessOutcome> => {
      const locked = await lockOrder(trx, order.id);
      if (!locked || locked.status === "completed" || locked.status === "not_run")
        return { status: "already_settled" };
      await insertAttestation(trx, {
        id: attestationId,
        order_id: order.id,
        kid: signed.kid,
        jws: signed.jws,
        payload: attestation as unknown as Record<string, unknown>,
        verdict: result.verdict,
        observed_at: observedAt,
        expires_at: new Date(attestation.expires_at),
      });
      await completeOrder(trx, order.id, result);
      await captureForOrder(trx, locked, attestationId, result.verdict);
      return { status: "completed", attestation_id: attestationId };
    }),
  );
}

/**
 * The probe could not run through our fault (the job's retries are spent, a crash, no signing key): the
 * order ends not_run and its hold is released in full. A settled order is left as it is.
 */
export async function abandonOrder(orderId: string, reason: string): Promise<ProcessOutcome> {
  return retryTransient(() =>
    db().transaction(async (trx): Promise<ProcessOutcome> => {
      const locked = await lockOrder(trx, orderId);
      if (!locked || locked.status === "completed" || locked.status === "not_run")
        return { status: "already_settled" };
      await markOrderNotRun(trx, orderId, reason);
      await releaseForOrder(trx, locked, reason);
      return { status: "not_run" };
    }),
  );
}

/** An order unsettled this long lost its job (a worker died past its retries): its hold goes back. */
export const STALE_ORDER_MINUTES = 60;

/**
 * Housekeeping (api/housekeeping.ts): releases orders still queued or running an hour after their last
 * change, as abandonOrder does for a job whose retries are spent. A probe that arrives later finds the
 * order settled and captures nothing. Returns how many were released.
 */
export async function abandonStaleOrders(): Promise<number> {
  const ids = await listStaleOrderIds(db(), STALE_ORDER_MINUTES, 100);
  let released = 0;
  for (const id of ids) {
    const outcome = await abandonOrder(
      id,
      `probe_not_completed: unsettled after ${STALE_ORDER_MINUTES} minutes`,
    );
    if (outcome.status === "not_run") released++;
  }
  return released;
}
