import { x402Facilitator } from "@x402/core/facilitator";
import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from "@x402/core/http";
import { type FacilitatorClient, type HTTPRequestContext, x402ResourceServer } from "@x402/core/server";
import type {
  PaymentPayload,
  PaymentRequired,
  PaymentRequirements,
  SettleResponse,
  SupportedResponse,
  VerifyResponse,
} from "@x402/core/types";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from "@x402/evm/exact/facilitator";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { EVM_NETWORK_CHAIN_ID_MAP } from "@x402/evm/v1";
import {
  bazaarResourceServerExtension,
  type DeclareDiscoveryExtensionInput,
  declareDiscoveryExtension,
} from "@x402/extensions/bazaar";
import type { Address, Hex } from "viem";
import { caip2, chainSettings, platformAddress, publicClient } from "../chain/client.js";
import { USDC_EIP712 } from "../chain/eip3009.js";
import { getConfig } from "../config.js";
import { AppError } from "../errors.js";
import { createAjv, violationsOf } from "../kernel/json-schema.js";
import { X402PaymentPayloadV1, X402PaymentPayloadV2 } from "./schemas/payment.js";
import type { StoredAuthorization, X402Protocol } from "./store/payments.js";

// The x402 side of the gateway (DESIGN §6, notes/payment-protocols.md): the official @x402/core resource
// server over an in-process x402Facilitator with @x402/evm's "exact" scheme. The facilitator VERIFIES
// only (signature, recipient, amount, validity window, the token, an on-chain simulation); settlement is
// ours, through the durable platform transaction (x402-settlement.ts), so the signed transaction is
// recorded before it is broadcast. Its signer therefore refuses to write.

export type { HTTPRequestContext, PaymentPayload, PaymentRequired, PaymentRequirements };

/** validBefore the SDK client signs: now + this. It covers the call (≤ 30 s) and the settlement. */
export const MAX_TIMEOUT_SECONDS = 300;

/** A payment must stay valid this long after acceptance, so the worker can still settle it. */
export const SETTLEMENT_WINDOW_SECONDS = 120;

/** The rail a challenge names: the configured chain, its USDC and the platform's address. */
export interface X402Rail {
  network: `eip155:${number}`;
  chainId: number;
  asset: Address;
  payTo: Address;
}

/** The configured rail, or undefined when no chain or no receiving address is configured. */
export function x402Rail(): X402Rail | undefined {
  const settings = chainSettings();
  const payTo = platformAddress();
  if (!settings || !payTo) return undefined;
  return { network: caip2(settings.chainId), chainId: settings.chainId, asset: settings.usdcAddress, payTo };
}

const readOnly = (what: string) => () =>
  Promise.reject(new Error(`the x402 facilitator only verifies; ${what} goes through durable-tx`));

/** An in-process facilitator that verifies on the configured chain (notes §3 b). */
function buildFacilitator(rail: X402Rail): FacilitatorClient {
  const client = publicClient();
  const signer = toFacilitatorEvmSigner({
    address: rail.payTo,
    readContract: (args) => client.readContract(args as Parameters<typeof client.readContract>[0]),
    verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
    getCode: (args) => client.getCode(args),
    writeContract: readOnly("settlement"),
    sendTransaction: readOnly("settlement"),
    waitForTransactionReceipt: readOnly("confirmation"),
  });
  const facilitator = new x402Facilitator().register(rail.network, new ExactEvmFacilitatorScheme(signer));
  return {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    getSupported: async () => facilitator.getSupported() as SupportedResponse,
  };
}

let cached: { key: string; server: Promise<x402ResourceServer> } | undefined;

/** The resource server for the configured rail (rebuilt when the chain, token or address change). */
async function resourceServer(rail: X402Rail): Promise<x402ResourceServer> {
  const config = getConfig();
  const key = `${config.chainRpcUrl}|${rail.network}|${rail.asset}|${rail.payTo}`;
  if (cached?.key !== key) {
    const server = new x402ResourceServer(buildFacilitator(rail))
      .register(rail.network, new ExactEvmServerScheme())
      .registerExtension(bazaarResourceServerExtension);
    const ready = server.initialize().then(() => server);
    cached = { key, server: ready };
    ready.catch(() => {
      if (cached?.server === ready) cached = undefined;
    });
  }
  return cached.server;
}

/** What a quote fixes about its payment. */
export interface PayableQuote {
  id: string;
  amount_micros: string;
  network: string | null;
  asset: string | null;
  pay_to: string | null;
}

/** The rail of a quote (as it was when quoted). */
function quoteRail(quote: PayableQuote): X402Rail {
  if (!quote.network || !quote.asset || !quote.pay_to) throw new Error(`quote ${quote.id} has no x402 rail`);
  return {
    network: quote.network as `eip155:${number}`,
    chainId: Number(quote.network.split(":")[1]),
    asset: quote.asset as Address,
    payTo: quote.pay_to as Address,
  };
}

async function buildRequirements(
  rail: X402Rail,
  amountMicros: string,
  extra: Record<string, unknown>,
): Promise<PaymentRequirements> {
  const [requirements] = await (await resourceServer(rail)).buildPaymentRequirements({
    scheme: "exact",
    network: rail.network,
    payTo: rail.payTo,
    price: { asset: rail.asset, amount: amountMicros, extra: { ...USDC_EIP712 } },
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    extra,
  });
  return requirements!;
}

/** The x402 v2 requirements that pay a quote: exact, atomic amount, extra {name, version, quote_id}. */
export function quoteRequirements(quote: PayableQuote): Promise<PaymentRequirements> {
  return buildRequirements(quoteRail(quote), quote.amount_micros, { quote_id: quote.id });
}

/**
 * Requirements for a listing's current price without a quote (discovery documents): a real challenge
 * adds its quote_id. Empty when no rail is configured — nothing can be paid then.
 */
export async function listingRequirements(amountMicros: string): Promise<PaymentRequirements[]> {
  const rail = x402Rail();
  return rail ? [await buildRequirements(rail, amountMicros, {})] : [];
}

/** The bazaar discovery extension for a body route (notes §6), built by the official helper. */
export function bazaarExtension(input: DeclareDiscoveryExtensionInput): Record<string, unknown> {
  return declareDiscoveryExtension(input);
}

/** The PaymentRequired of a 402 (x402 v2) with the bazaar extension enriched for this request's method. */
export async function paymentRequired(args: {
  quote: PayableQuote;
  requirements: PaymentRequirements;
  resource: { url: string; description: string; mimeType: string };
  bazaar: Record<string, unknown>;
  request: HTTPRequestContext;
  error?: string;
}): Promise<PaymentRequired> {
  const server = await resourceServer(quoteRail(args.quote));
  const extensions = server.enrichExtensions(args.bazaar, args.request);
  return server.createPaymentRequiredResponse(
    [args.requirements],
    args.resource,
    args.error,
    extensions,
    args.request,
  );
}

/** The PAYMENT-REQUIRED header value (base64 JSON, the SDK's codec). */
export const encodePaymentRequired = (p: PaymentRequired): string => encodePaymentRequiredHeader(p);

/** A payment as presented on the retry, normalized across x402 v2, v1 and MPP. */
export interface PresentedPayment {
  protocol: X402Protocol;
  /** The request header it came in. */
  header: string;
  scheme: string;
  network: string;
  /** x402 v2: the requirements the client says it paid (asset, amount, payTo, extra.quote_id). */
  accepted?: PaymentRequirements;
  /** The quote the payment names: accepted.extra.quote_id (x402 v2) or the MPP request's externalId. */
  quoteId?: string;
  authorization: StoredAuthorization;
  signature: Hex;
  /** MPP: the challenge id its nonce is bound to. */
  challengeId?: string;
}

const ajv = createAjv();
const checkV2 = ajv.compile(X402PaymentPayloadV2);
const checkV1 = ajv.compile(X402PaymentPayloadV1);

/** 400 for a payment header that cannot be read (never 402: nothing about it can be checked). */
export function malformedPayment(header: string, reason: string, violations: unknown[] = []): AppError {
  return new AppError("SCHEMA_VALIDATION_FAILED", `malformed payment header: ${reason}`, {
    reason: "malformed_payment_header",
    header,
    violations: [{ path: `/headers/${header}`, message: reason }, ...violations],
  });
}

/** x402 network names: CAIP-2 as is; v1 names ("base") through @x402/evm's table. */
function caip2Network(network: string): string {
  if (network.includes(":")) return network;
  const chainId = (EVM_NETWORK_CHAIN_ID_MAP as Record<string, number>)[network];
  return chainId ? `eip155:${chainId}` : network;
}

/** Decodes an x402 payment header (PAYMENT-SIGNATURE, X-PAYMENT-SIGNATURE or X-PAYMENT). */
export function decodeX402Header(header: string, value: string): PresentedPayment {
  let decoded: unknown;
  try {
    decoded = decodePaymentSignatureHeader(value.trim());
  } catch {
    throw malformedPayment(header, "not base64-encoded JSON");
  }
  const version = (decoded as { x402Version?: unknown } | null)?.x402Version;
  if (version === 2) {
    if (!checkV2(decoded))
      throw malformedPayment(header, "not an x402 v2 exact-EVM payment", violationsOf(checkV2.errors));
    const p = decoded as PaymentPayload & { payload: { signature: Hex; authorization: StoredAuthorization } };
    const quoteId = p.accepted.extra?.quote_id;
    return {
      protocol: header === "x-payment" ? "x402v1" : "x402v2",
      header,
      scheme: p.accepted.scheme,
      network: p.accepted.network,
      accepted: { ...p.accepted, extra: p.accepted.extra ?? {} },
      ...(typeof quoteId === "string" ? { quoteId } : {}),
      authorization: p.payload.authorization,
      signature: p.payload.signature,
    };
  }
  if (version === 1) {
    if (!checkV1(decoded))
      throw malformedPayment(header, "not an x402 v1 exact-EVM payment", violationsOf(checkV1.errors));
    const p = decoded as {
      scheme: string;
      network: string;
      payload: { signature: Hex; authorization: StoredAuthorization };
    };
    return {
      protocol: "x402v1",
      header,
      scheme: p.scheme,
      network: caip2Network(p.network),
      authorization: p.payload.authorization,
      signature: p.payload.signature,
    };
  }
  throw malformedPayment(header, "x402Version must be 1 or 2");
}

/** Verifies the authorization against the quote's requirements with the in-process facilitator. */
export async function verifyPresented(
  quote: PayableQuote,
  presented: PresentedPayment,
  requirements: PaymentRequirements,
): Promise<VerifyResponse> {
  const server = await resourceServer(quoteRail(quote));
  const payload: PaymentPayload = {
    x402Version: 2,
    // v1 and MPP carry no `accepted`: what they pay was checked against the quote field by field.
    accepted: presented.accepted ?? requirements,
    payload: { signature: presented.signature, authorization: presented.authorization },
  };
  return server.verifyPayment(payload, requirements);
}

/**
 * The PAYMENT-RESPONSE value (base64 SettleResponse), only ever built from a recorded transaction:
 * `transaction` is its hash and `extra.settlement_state` says whether it is only submitted or confirmed
 * (with the block), so a client never reads more into it than the chain shows.
 */
export function encodeSettleResponse(s: {
  transaction: string;
  network: string;
  payer: string;
  amountMicros: string;
  state: "submitted" | "confirmed";
  blockNumber: string | null;
}): string {
  const response: SettleResponse = {
    success: true,
    transaction: s.transaction,
    network: s.network as `${string}:${string}`,
    payer: s.payer,
    amount: s.amountMicros,
    extra: { settlement_state: s.state, block_number: s.blockNumber },
  };
  return encodePaymentResponseHeader(response);
}
