import { AppError } from "../errors.js";
import { FetchFailure, type SafeFetchResponse, safeFetch } from "../net/safe-fetch.js";

// Calls to operator-configured providers (Firecrawl, SearXNG, Brave, the model API): through the one
// outbound boundary like everything else. A provider's failure becomes an error of the tool's own
// endpoint (non-2xx), so the executions worker records PROVIDER_FAILED and releases the hold. Keys go in
// headers only and never into a message: errors name the provider and the status, nothing else.

/** The tool endpoint's answer when its provider failed: 502 PROVIDER_FAILED, or 504 TIMEOUT. */
export function providerFailure(
  provider: string,
  what: string,
  extra: Record<string, unknown> = {},
): AppError {
  return new AppError("PROVIDER_FAILED", `${provider}: ${what}`, {
    reason: "provider_failed",
    provider,
    ...extra,
  });
}

/** POST or GET JSON to a provider; any transport failure or non-2xx is a providerFailure. */
export async function callProviderJson(
  provider: string,
  url: string,
  options: {
    method: "GET" | "POST";
    headers: Record<string, string>;
    body?: unknown;
    timeoutMs: number;
    maxBytes?: number;
  },
): Promise<{ status: number; json: unknown }> {
  let response: SafeFetchResponse;
  try {
    response = await safeFetch(url, {
      method: options.method,
      headers: {
        accept: "application/json",
        ...(options.body === undefined ? {} : { "content-type": "application/json" }),
        ...options.headers,
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      timeoutMs: options.timeoutMs,
      maxBytes: options.maxBytes ?? 4 * 1024 * 1024,
    });
  } catch (error) {
    if (!(error instanceof FetchFailure)) throw error;
    if (error.kind === "timeout")
      throw new AppError("TIMEOUT", `${provider}: no answer in time`, {
        reason: "provider_timeout",
        provider,
      });
    throw providerFailure(provider, `unreachable (${error.kind})`);
  }
  if (response.status < 200 || response.status >= 300) {
    throw providerFailure(provider, `answered HTTP ${response.status}`, { provider_status: response.status });
  }
  try {
    return { status: response.status, json: JSON.parse(response.body.toString("utf8")) };
  } catch {
    throw providerFailure(provider, "answered with a body that is not JSON");
  }
}

/** A plain-text string: tags removed, entities of the common kind decoded, whitespace collapsed. */
export function plainText(value: unknown): string {
  if (typeof value !== "string") return "";
  return value
    .replace(/<[^>]*>/g, "")
    .replace(/&(amp|lt|gt|quot|#39|apos|nbsp);/g, (_, e: string) =>
      e === "amp" ? "&" : e === "lt" ? "<" : e === "gt" ? ">" : e === "quot" ? '"' : e === "nbsp" ? " " : "'",
    )
    .replace(/\s+/g, " ")
    .trim();
}

/** An http(s) URL as a string, or null for anything else. */
export function httpUrl(value: unknown): string | null {
  if (typeof value !== "string") return null;
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}
