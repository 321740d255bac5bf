import type { Knex } from "knex";
import { chainSettings, platformAddress, platformSigner, publicClient } from "../../chain/client.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { refusedAs } from "../../db/refusals.js";
import { AppError, paidExecutionUnavailable } from "../../errors.js";
import { logger } from "../../log.js";
import { assertCustodyOpenForShare, CUSTODY_FROZEN, type CustodyState, readCustody } from "./store.js";

/**
 * The paid-execution gate (DESIGN §5), computed afresh on every call from three things: the operator's
 * custody switch (platform_settings, read from the database each time), the configured rail (RPC URL and
 * signer) and a live check that the RPC answers with the configured chain id (cached for at most
 * CHAIN_CHECK_CACHE_MS so a burst of reads makes one request). Paid authority needs all three.
 */
/** The paid-execution gate as computed for this read (DESIGN §5). */
export interface PaidGate {
  enabled: boolean;
  /** e.g. "platform_custody_frozen" when not enabled. */
  reason: string | null;
}

export interface GateReading extends PaidGate {
  custody: CustodyState | null;
  /** False when the custody switch itself could not be read (the gate is then closed). */
  authorityReadOk: boolean;
  rail: { configured: boolean; rpc_ok: boolean | null; chain_id: number | null; signer: boolean };
}

/** Why paid execution is off, most fundamental first. */
export const GATE_REASONS = {
  custody_unreadable: "platform_custody_unreadable",
  frozen: "platform_custody_frozen",
  no_signer: "settlement_signer_not_configured",
  rpc_unreachable: "settlement_rpc_unreachable",
  chain_mismatch: "settlement_chain_mismatch",
} as const;

type RpcCheck = { ok: true; chainId: number } | { ok: false; reason: string; chainId: number | null };

let rpcCheck: { key: string; at: number; pending: Promise<RpcCheck> } | undefined;

async function checkRpc(): Promise<RpcCheck> {
  const config = getConfig();
  const key = `${config.chainRpcUrl}|${config.chainId}`;
  const now = Date.now();
  if (!rpcCheck || rpcCheck.key !== key || now - rpcCheck.at > config.chainCheckCacheMs) {
    const pending = publicClient()
      .getChainId()
      .then(
        (chainId): RpcCheck =>
          chainId === config.chainId
            ? { ok: true, chainId }
            : { ok: false, reason: GATE_REASONS.chain_mismatch, chainId },
        (err: unknown): RpcCheck => {
          logger().warn({ err }, "settlement RPC check failed");
          return { ok: false, reason: GATE_REASONS.rpc_unreachable, chainId: null };
        },
      );
    rpcCheck = { key, at: now, pending };
  }
  return rpcCheck.pending;
}

/** Forgets the cached RPC check and the kept open reading (tests that stop or swap the chain). */
export function resetGateCache(): void {
  rpcCheck = undefined;
  forgetKeptGate();
}

/**
 * The last reading of the custody switch in this process that found it open, and when it was made
 * (docs/payments.md "The gate a hold proves"). Only an open switch is kept: a frozen one is read afresh
 * on every call, so an unfreeze binds at the next request.
 */
let keptOpenCustody: { at: number; custody: CustodyState } | undefined;
/** Moved each time a hold finds custody frozen: a reading begun before that is not kept. */
let forgotten = 0;

function forgetKeptGate(): void {
  keptOpenCustody = undefined;
  forgotten += 1;
}

/** Reads the gate with its reasons; never throws. */
export async function readGate(): Promise<GateReading> {
  const at = Date.now();
  const since = forgotten;
  let custody: CustodyState | null = null;
  try {
    custody = await readCustody(db());
  } catch (err) {
    logger().warn({ err }, "custody state could not be read");
  }
  if (!custody || custody.frozen) keptOpenCustody = undefined;
  else if (since === forgotten) keptOpenCustody = { at, custody };
  return gateWith(custody);
}

/** The gate for this custody reading (null: unreadable), the rail checked now (its RPC check cached). */
async function gateWith(custody: CustodyState | null): Promise<GateReading> {
  const configured = chainSettings() !== undefined;
  const signer = platformSigner() !== undefined && platformAddress() !== undefined;
  const rail = { configured, rpc_ok: null as boolean | null, chain_id: null as number | null, signer };
  const closed = (reason: string): GateReading => ({
    enabled: false,
    reason,
    custody,
    authorityReadOk: custody !== null,
    rail,
  });
  if (!custody) return closed(GATE_REASONS.custody_unreadable);
  // No rail at all is custody frozen: the platform holds nothing it could move (the fresh-install state).
  if (custody.frozen || !configured) return closed(GATE_REASONS.frozen);
  if (!signer) return closed(GATE_REASONS.no_signer);
  const rpc = await checkRpc();
  rail.rpc_ok = rpc.ok;
  rail.chain_id = rpc.chainId;
  if (!rpc.ok) return closed(rpc.reason);
  return { enabled: true, reason: null, custody, authorityReadOk: true, rail };
}

/** The gate as listing records and the router need it. */
export async function paidGate(): Promise<PaidGate> {
  const { enabled, reason } = await readGate();
  return { enabled, reason };
}

/**
 * The gate for a paid submission, whose hold re-reads custody under a share lock in its own transaction
 * (assertCustodyOpen) and so proves the custody half of this answer: an open custody reading made in
 * this process within CHAIN_CHECK_CACHE_MS (the rail check's own budget) is used without reading the
 * switch again; the rail is checked as on every read. A freeze since then fails the hold, which writes
 * nothing and forgets the kept reading; the caller then decides again on a fresh one (docs/payments.md
 * "The gate a hold proves"). Only for paths whose every paid write goes through assertCustodyOpen.
 */
export async function paidGateProvedByHold(): Promise<PaidGate> {
  const kept = keptOpenCustody;
  const { enabled, reason } =
    kept && Date.now() - kept.at < getConfig().chainCheckCacheMs
      ? await gateWith(kept.custody)
      : await readGate();
  return { enabled, reason };
}

/** A 503 that says custody is frozen: what a hold answers when its custody check fails. */
export function isCustodyFrozenRefusal(error: unknown): boolean {
  return (
    error instanceof AppError &&
    error.code === "TEMPORARILY_UNAVAILABLE" &&
    (error.details as { reason?: unknown } | undefined)?.reason === GATE_REASONS.frozen
  );
}

/** Throws 503 TEMPORARILY_UNAVAILABLE (with the reason) unless paid execution is enabled right now. */
export async function assertPaidExecutionEnabled(): Promise<void> {
  const gate = await paidGate();
  if (!gate.enabled) throw paidExecutionUnavailable(gate.reason ?? "paid_execution_disabled");
}

/**
 * The in-transaction half of the gate for a paid write: re-reads custody under a share lock, so a
 * freeze that commits first is seen and one that comes later waits for this transaction. Frozen, its
 * statement fails, so the transaction is aborted: nothing sent behind it commits.
 */
export async function assertCustodyOpen(trx: Knex.Transaction): Promise<void> {
  await assertCustodyOpenForShare(trx).catch(
    refusedAs(CUSTODY_FROZEN, () => {
      forgetKeptGate(); // the next paid submission reads the gate afresh
      return paidExecutionUnavailable(GATE_REASONS.frozen);
    }),
  );
}

/** Routes that answer without payment and without a key: safe to call in any availability state. */
export const SAFE_DISCOVERY_ENDPOINTS = [
  "/market.json",
  "/api/capabilities",
  "/api/capabilities/{id}",
  "/api/tools/echo",
  "/api/health",
  "/api/stats",
  "/api/quickstart",
  "/openapi.json",
  "/openapi.yaml",
] as const;

/** Where a person starts: how to register, the catalog, and the API description. */
export const HUMAN_ENTRY_PATHS = ["/api/quickstart", "/market.json", "/openapi.yaml"] as const;

/** The spec's availability block, read now. */
export async function availability(reading?: GateReading) {
  const gate = reading ?? (await readGate());
  const custody = {
    status: gate.custody && !gate.custody.frozen && gate.rail.configured ? "active" : "frozen",
    authoritative: true,
    authority_read_ok: gate.authorityReadOk,
  };
  const common = {
    safe_discovery_endpoints: [...SAFE_DISCOVERY_ENDPOINTS],
    human_entry_paths: [...HUMAN_ENTRY_PATHS],
    custody,
  };
  if (gate.enabled) {
    return {
      status: "available",
      paid_execution: "enabled",
      reason: null,
      reason_null_reason: "paid_execution_enabled",
      intent: "paid_and_free_execution",
      scope: "platform",
      completion_target: null,
      completion_target_null_reason: "nothing_pending",
      architecture_state: "settlement_rail_live",
      message: "Paid and free execution are available. Read this block again before each paid action.",
      ...common,
    };
  }
  return {
    status: "read_only",
    paid_execution: "temporarily_unavailable",
    reason: gate.reason,
    intent: "protect_buyer_funds_until_settlement_is_live",
    scope: "paid_execution",
    completion_target: null,
    completion_target_null_reason: gate.rail.configured
      ? "operator_decision_or_rail_recovery"
      : "no_settlement_rail_configured",
    architecture_state: gate.rail.configured
      ? "settlement_rail_configured"
      : "settlement_rail_not_configured",
    message:
      "Paid execution is temporarily unavailable: do not call paid routes, sign payments, send funds or retry paid " +
      "calls. Discovery, catalog, health, proof routes and free execution (task 'echo') remain available.",
    ...common,
  };
}

/** The funding block of marketplace_info: funding follows the gate. */
export function funding(gate: PaidGate) {
  return gate.enabled
    ? { status: "available", reason: null }
    : { status: "temporarily_unavailable", reason: gate.reason };
}
