import { Agent, request } from "undici";

/**
 * The one outbound HTTP boundary (DESIGN §7). Every provider call goes through here: time is capped,
 * the response size is capped, redirects are never followed, connections are pooled.
 *
 * Not yet here (the router issue): DNS resolution checked inside the connect lookup, the blocked
 * address ranges, per-hop redirect checks and the test allowlist. Until then only first-party
 * listings (created by migrations) are callable, so no user-supplied URL reaches this module.
 */
export type FetchFailureKind = "timeout" | "connect" | "too_large" | "redirect" | "network";

export class FetchFailure extends Error {
  constructor(
    readonly kind: FetchFailureKind,
    message: string,
  ) {
    super(message);
    this.name = "FetchFailure";
  }
}

export interface SafeFetchOptions {
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  maxBytes: number;
}

export interface SafeFetchResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  latencyMs: number;
}

const dispatcher = new Agent({ connections: 256, keepAliveTimeout: 10_000, connect: { timeout: 5_000 } });

const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
]);

function classify(error: unknown, signal: AbortSignal): FetchFailure {
  if (error instanceof FetchFailure) return error;
  if (signal.aborted) return new FetchFailure("timeout", "the endpoint did not answer in time");
  const code = (error as { code?: string }).code ?? (error as { cause?: { code?: string } }).cause?.code;
  if (code && CONNECT_CODES.has(code))
    return new FetchFailure("connect", `could not reach the endpoint (${code})`);
  return new FetchFailure("network", `request failed: ${(error as Error).message}`);
}

export async function safeFetch(url: string, options: SafeFetchOptions): Promise<SafeFetchResponse> {
  const signal = AbortSignal.timeout(options.timeoutMs);
  const started = performance.now();
  try {
    const response = await request(url, {
      method: options.method,
      headers: options.headers,
      body: options.body,
      signal,
      dispatcher,
    });
    if (response.statusCode >= 300 && response.statusCode < 400) {
      response.body.destroy();
      throw new FetchFailure(
        "redirect",
        `the endpoint redirected (HTTP ${response.statusCode}); redirects are not followed`,
      );
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body) {
      size += (chunk as Buffer).length;
      if (size > options.maxBytes) {
        response.body.destroy();
        throw new FetchFailure("too_large", `the response is over ${options.maxBytes} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    return {
      status: response.statusCode,
      headers: response.headers,
      body: Buffer.concat(chunks),
      latencyMs: Math.round(performance.now() - started),
    };
  } catch (error) {
    throw classify(error, signal);
  }
}

export async function closeSafeFetch(): Promise<void> {
  await dispatcher.close();
}
