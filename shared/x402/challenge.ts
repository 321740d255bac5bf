import type { ListingRow } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { deleteStaleQuotes, type QuoteRow } from "../routing/index.js";
import { formatWwwAuthenticate, mppChallenge } from "./mpp.js";
import {
  bazaarExtension,
  encodePaymentRequired,
  type HTTPRequestContext,
  paymentRequired,
  quoteRequirements,
} from "./protocol.js";
import { quoteView } from "./views.js";

// The 402 of the gateway: one answer, two protocols (notes §7). Machines read the headers —
// PAYMENT-REQUIRED (x402 v2, base64 JSON: accepts [exact, network, amount, asset, payTo,
// maxTimeoutSeconds, extra {name, version, quote_id}], resource, the bazaar extension) and
// WWW-Authenticate: Payment (MPP) — people read the body, the one error envelope with the same content
// decoded and the steps to pay. Cache-Control: no-store, as the x402 SDK sends.

export type PaidRoute = "execute" | "invoke";

/**
 * The bazaar extension of a paid route (notes §6): the JSON Schema of its whole body, from the listing's
 * input_schema, and its output_schema. In a challenge the resource server fills `method` from the
 * request; discovery documents, which have no request, pass it.
 */
export function bazaarFor(
  route: PaidRoute,
  listing: ListingRow,
  quoteId?: string,
  method?: "POST",
): Record<string, unknown> {
  const input = listing.input_schema ?? { type: "object" };
  const output = listing.output_schema ? { output: { example: {}, schema: listing.output_schema } } : {};
  const declared =
    route === "execute"
      ? bazaarExtension({
          bodyType: "json",
          input: { quote_id: quoteId ?? "<quote_id>", input: {} },
          inputSchema: {
            type: "object",
            required: ["quote_id", "input"],
            properties: {
              quote_id: quoteId ? { type: "string", const: quoteId } : { type: "string" },
              input,
            },
          },
          ...output,
        })
      : bazaarExtension({
          bodyType: "json",
          input: { input: {} },
          inputSchema: { type: "object", required: ["input"], properties: { input } },
          ...output,
        });
  if (!method) return declared;
  const bazaar = declared.bazaar as {
    info: { input: Record<string, unknown> };
    schema: { properties: { input: { properties: Record<string, unknown> } } };
  };
  bazaar.info.input.method = method;
  bazaar.schema.properties.input.properties.method = { type: "string", enum: [method] };
  return declared;
}

function description(listing: ListingRow): string {
  return `${listing.name}: ${listing.description}`.slice(0, 300);
}

/** A quote that can still be paid right now. */
export const payable = (quote: QuoteRow) => !quote.used_at && quote.expires_at.getTime() > Date.now();

/**
 * The 402 challenge for a quote, as an AppError (PAYMENT_REQUIRED) carrying both protocols' headers.
 * `reason` is payment_required for a first call, else why a presented payment was refused (x402 puts it
 * in the PaymentRequired `error`).
 */
export async function challengeError(args: {
  route: PaidRoute;
  quote: QuoteRow;
  listing: ListingRow;
  request: HTTPRequestContext;
  reason: string;
  message: string;
  details?: Record<string, unknown>;
}): Promise<AppError> {
  const { quote, listing, request } = args;
  const base = getConfig().publicBaseUrl;
  const requirements = await quoteRequirements(quote);
  const required = await paymentRequired({
    quote,
    requirements,
    resource: {
      url: `${base}${request.path}`,
      description: description(listing),
      mimeType: "application/json",
    },
    bazaar: bazaarFor(args.route, listing, quote.id),
    request,
    error: args.reason === "payment_required" ? "PAYMENT-SIGNATURE header is required" : args.reason,
  });
  const mpp = mppChallenge(quote, description(listing));
  return new AppError(
    "PAYMENT_REQUIRED",
    args.message,
    {
      reason: args.reason,
      ...args.details,
      quote: quoteView(quote, listing),
      x402: required,
      mpp: {
        www_authenticate: formatWwwAuthenticate(mpp.challenge),
        challenge: mpp.challenge,
        request: mpp.request,
      },
      how_to_pay: [
        "x402: sign accepts[0] (EIP-3009 TransferWithAuthorization, EIP-712 domain {name, version} from extra, " +
          "verifyingContract = asset) and retry the same request with header PAYMENT-SIGNATURE: base64(PaymentPayload)",
        "MPP: answer the WWW-Authenticate challenge with Authorization: Payment <base64url credential>, EIP-3009 " +
          "nonce = keccak256(challenge.id ‖ realm)",
        "no registration, no API key and no gas: the platform submits the transfer after the call succeeds; " +
          "a failed call is never settled",
      ],
    },
    {
      "PAYMENT-REQUIRED": encodePaymentRequired(required),
      "WWW-Authenticate": formatWwwAuthenticate(mpp.challenge),
      "Cache-Control": "no-store",
    },
  );
}

/** A 402 that carries no challenge: nothing about this quote can be paid any more. */
export function unpayable(reason: string, message: string, details: Record<string, unknown> = {}): AppError {
  return new AppError("PAYMENT_REQUIRED", message, { reason, ...details }, { "Cache-Control": "no-store" });
}

/** Housekeeping: quotes never paid that expired over a day ago are only clutter. */
export async function purgeStaleQuotes(): Promise<void> {
  await deleteStaleQuotes(db(), 24);
}
