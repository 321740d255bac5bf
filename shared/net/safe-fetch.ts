import { type Dispatcher, request } from "undici";
import { getConfig } from "../config.js";
import { createDispatchers, type Dispatchers } from "./guarded-agent.js";
import { checkUrlRules, type ResolveAll, systemResolveAll, UnsafeEndpoint } from "./url-policy.js";

/**
 * The one outbound HTTP boundary (DESIGN §7). Every outbound call goes through here: each hop's URL is
 * checked by url-policy before the request, names are checked again inside the connect lookup (no
 * DNS-rebinding gap), redirects are followed by hand and only when asked, time covers every hop, the
 * response size is capped and connections are pooled.
 */
export type FetchFailureKind = "timeout" | "connect" | "too_large" | "redirect" | "network" | "blocked";

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
  /** Budget for the whole call: every redirect hop and the body. */
  timeoutMs: number;
  maxBytes: number;
  /** The call goes to the platform's own first-party origin: that origin skips the address rules. */
  trusted?: boolean;
  /** Redirects to follow, each re-checked; default 0 (a redirect is a failure), at most 5. */
  maxRedirects?: number;
}

export interface SafeFetchResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  latencyMs: number;
  /** The URL that answered: the requested one, or the last redirect hop's. */
  url: string;
}

export type SafeFetch = (url: string, options: SafeFetchOptions) => Promise<SafeFetchResponse>;

export const REDIRECT_CAP = 5;
const FOLLOWED = new Set([301, 302, 303, 307, 308]);
// Sent only to the origin the caller addressed; a redirect elsewhere must not carry them.
const ORIGIN_BOUND_HEADERS = new Set(["authorization", "cookie", "proxy-authorization"]);

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

function classify(error: unknown, signal: AbortSignal, url: string): FetchFailure {
  if (error instanceof FetchFailure) return error;
  if (error instanceof UnsafeEndpoint) return new FetchFailure("blocked", `refused ${url}: ${error.message}`);
  if (signal.aborted) return new FetchFailure("timeout", "the endpoint did not answer in time");
  const code = (error as { code?: string }).code ?? (error as { cause?: { code?: string } }).cause?.code;
  if (code && CONNECT_CODES.has(code))
    return new FetchFailure("connect", `could not reach the endpoint (${code})`);
  return new FetchFailure("network", `request failed: ${(error as Error).message}`);
}

/** True when url has the origin of FIRST_PARTY_BASE_URL, the platform's own providers. */
export function isFirstPartyUrl(url: string | URL): boolean {
  try {
    return new URL(url).origin === new URL(getConfig().firstPartyBaseUrl).origin;
  } catch {
    return false;
  }
}

interface Hop {
  url: URL;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body: string | undefined;
}

/** The next hop of a redirect, or a "redirect" failure when it may not be followed. */
function nextHop(hop: Hop, status: number, location: unknown, followed: number, max: number): Hop {
  if (followed >= max) {
    const why = max === 0 ? "redirects are not followed" : `more than ${max} redirects`;
    throw new FetchFailure("redirect", `the endpoint redirected (HTTP ${status}); ${why}`);
  }
  if (!FOLLOWED.has(status) || typeof location !== "string") {
    throw new FetchFailure("redirect", `the endpoint redirected (HTTP ${status}) without a usable Location`);
  }
  let url: URL;
  try {
    url = new URL(location, hop.url);
  } catch {
    throw new FetchFailure("redirect", `the endpoint redirected to an invalid URL (${location})`);
  }
  const headers = { ...hop.headers };
  if (url.origin !== hop.url.origin) {
    for (const name of Object.keys(headers))
      if (ORIGIN_BOUND_HEADERS.has(name.toLowerCase())) delete headers[name];
  }
  // 307/308 promise the same request again; 301/302/303 mean "GET the result from there" (RFC 9110 §15.4).
  if (status === 307 || status === 308) return { url, method: hop.method, headers, body: hop.body };
  for (const name of Object.keys(headers)) if (/^content-/i.test(name)) delete headers[name];
  return { url, method: "GET", headers, body: undefined };
}

type Body = Dispatcher.ResponseData["body"];

// A body destroyed before it is read emits "aborted" with no one listening; nobody needs that error.
function discard(body: Body): void {
  body.on("error", () => {});
  body.destroy();
}

/**
 * The whole body, refused past maxBytes. Read from its events rather than with `for await`: an async
 * iterator costs several promises per chunk, on every provider call (docs/benchmarks.md "The sixth round").
 */
function readCapped(body: Body, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        body.off("data", onData);
        discard(body);
        reject(new FetchFailure("too_large", `the response is over ${maxBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    body.on("data", onData);
    body.once("end", () => resolve(Buffer.concat(chunks, size)));
    body.once("error", reject);
  });
}

async function run(
  dispatchers: Dispatchers,
  first: string,
  options: SafeFetchOptions,
  signal: AbortSignal,
  progress: { url: string },
): Promise<SafeFetchResponse> {
  const started = performance.now();
  const max = Math.max(0, Math.min(options.maxRedirects ?? 0, REDIRECT_CAP));
  let target: string | URL = first;
  let { method, headers, body } = options;
  for (let followed = 0; ; followed++) {
    progress.url = String(target);
    // trusted widens the rules for the first-party origin only, never for where it redirects to.
    const verdict = checkUrlRules(target, { exempt: options.trusted === true && isFirstPartyUrl(target) });
    const response = await request(verdict.url, {
      method,
      headers,
      body,
      signal,
      dispatcher: verdict.exempt ? dispatchers.exempt : dispatchers.guarded,
    });
    if (response.statusCode >= 300 && response.statusCode < 400) {
      // Drain (up to undici's small limit) so the connection can be reused, then decide.
      await response.body.dump().catch(() => {});
      const hop = { url: verdict.url, method, headers, body };
      ({
        url: target,
        method,
        headers,
        body,
      } = nextHop(hop, response.statusCode, response.headers.location, followed, max));
      continue;
    }
    const declared = Number(response.headers["content-length"]);
    if (declared > options.maxBytes) {
      discard(response.body);
      throw new FetchFailure("too_large", `the response is over ${options.maxBytes} bytes`);
    }
    return {
      status: response.statusCode,
      headers: response.headers,
      body: await readCapped(response.body, options.maxBytes),
      latencyMs: Math.round(performance.now() - started),
      url: verdict.url.href,
    };
  }
}

export interface SafeFetchInstance {
  safeFetch: SafeFetch;
  close(): Promise<void>;
}

/** A safe fetch with its own connection pools; tests pass a resolver so no real DNS is ever asked. */
export function createSafeFetch(deps: { resolveAll?: ResolveAll } = {}): SafeFetchInstance {
  const dispatchers = createDispatchers(deps.resolveAll ?? systemResolveAll);
  return {
    async safeFetch(url, options) {
      // A timer cleared when the call ends, not AbortSignal.timeout: that one's timer and signal outlive
      // a fast call by its whole deadline, and under load V8 then promoted twice as much of each call's
      // garbage to the old generation (docs/benchmarks.md, "Garbage").
      const deadline = new AbortController();
      const timer = setTimeout(
        () => deadline.abort(new DOMException("the deadline passed", "TimeoutError")),
        options.timeoutMs,
      );
      const progress = { url };
      try {
        return await run(dispatchers, url, options, deadline.signal, progress);
      } catch (error) {
        throw classify(error, deadline.signal, progress.url);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      await Promise.all([dispatchers.guarded.close(), dispatchers.exempt.close()]);
    },
  };
}

// Created on first use and again after close, so a process (or test) that closes and restarts works.
let shared: SafeFetchInstance | undefined;

/** Calls url under the outbound policy; fails with FetchFailure (kind says why). */
export async function safeFetch(url: string, options: SafeFetchOptions): Promise<SafeFetchResponse> {
  shared ??= createSafeFetch();
  return shared.safeFetch(url, options);
}

/** Closes the shared connection pools (process shutdown). */
export async function closeSafeFetch(): Promise<void> {
  const closing = shared;
  shared = undefined;
  await closing?.close();
}
