import { randomUUID } from "node:crypto";
import { AgentMarketError, type ErrorEnvelope } from "./errors.js";
import type { paths } from "./openapi.js";

// The Agent Market client: one method per SDK call of the spec, plus waitForResult and the wallet and
// seller helpers. It retries only errors the service marks retryable (and network failures), with the
// same idempotency key, honouring Retry-After. No dependency beyond the platform's fetch.

type Json<P extends keyof paths, M extends string, S extends number> = P extends keyof paths
  ? paths[P] extends Record<M, { responses: Record<S, { content: { "application/json": infer T } }> }>
    ? T
    : never
  : never;

export type RegisterResult = Json<"/api/quickstart", "post", 201>;
export type MatchResult = Json<"/api/execute/match", "get", 200>;
export type Quote = Json<"/api/quotes", "post", 201>;
export type ExecuteResult = Json<"/api/execute", "post", 200>;
export type ExecutePending = Json<"/api/execute", "post", 202>;
export type InvocationStatus = Json<"/api/execute/status/{invocation_id}", "get", 200>;
export type Receipt = Json<"/api/commerce/receipts/{receipt_id}", "get", 200>;
export type Wallet = Json<"/api/wallet", "get", 200>;
export type Pricing = Json<"/api/wallet/pricing", "get", 200>;
export type SellerStatus = Json<"/api/seller/status", "get", 200>;
export type ListingRecord = Json<"/api/capabilities", "post", 201>;

export interface ClientOptions {
  /** e.g. http://localhost:3000 */
  baseUrl: string;
  apiKey?: string;
  /** Per request, in ms (default 30 000). */
  timeoutMs?: number;
  /** Retries of a retryable failure (default 3). */
  maxRetries?: number;
  /** For tests and custom transports; the platform's fetch by default. */
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Sent as X-Idempotency-Key; generated per call when not given, and kept across retries. */
  idempotencyKey?: string;
  timeoutMs?: number;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

function retryAfterOf(res: Response, body: unknown): number | null {
  const header = res.headers.get("retry-after");
  if (header && /^\d+$/.test(header)) return Number(header);
  const seconds = (body as ErrorEnvelope | undefined)?.error?.details?.retry_after_seconds;
  return typeof seconds === "number" ? seconds : null;
}

export class AgentMarket {
  readonly baseUrl: string;
  private readonly apiKey?: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 3;
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** A client for the same service with another key (e.g. the one register answered). */
  withKey(apiKey: string): AgentMarket {
    return new AgentMarket({
      baseUrl: this.baseUrl,
      apiKey,
      timeoutMs: this.timeoutMs,
      maxRetries: this.maxRetries,
      fetch: this.fetchImpl,
    });
  }

  /** One request with the retry rule; answers the parsed body and the response. */
  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    options: CallOptions = {},
  ): Promise<{ status: number; body: T; headers: Headers }> {
    const idempotencyKey = method === "POST" ? (options.idempotencyKey ?? randomUUID()) : undefined;
    for (let attempt = 0; ; attempt++) {
      const timeout = AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs);
      const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
      const headers: Record<string, string> = { accept: "application/json" };
      if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
      if (idempotencyKey) headers["x-idempotency-key"] = idempotencyKey;
      if (body !== undefined) headers["content-type"] = "application/json";
      let failure: AgentMarketError;
      try {
        const res = await this.fetchImpl(`${this.baseUrl}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal,
        });
        const text = await res.text();
        const parsed = text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text;
        if (res.ok) return { status: res.status, body: parsed as T, headers: res.headers };
        const envelope = (parsed as ErrorEnvelope)?.error ? (parsed as ErrorEnvelope) : null;
        failure = new AgentMarketError({
          code: envelope?.error.code ?? `HTTP_${res.status}`,
          message: envelope?.error.message ?? `HTTP ${res.status}`,
          status: res.status,
          retryable: envelope?.error.retryable ?? res.status >= 500,
          retryAfter: retryAfterOf(res, parsed),
          envelope,
        });
      } catch (error) {
        if (options.signal?.aborted) throw error;
        const timedOut = timeout.aborted;
        failure = new AgentMarketError({
          code: timedOut ? "TIMEOUT" : "NETWORK_ERROR",
          message: timedOut ? "the request timed out" : `could not reach ${this.baseUrl}`,
          status: null,
          retryable: true,
          cause: error,
        });
      }
      if (!failure.retryable || attempt >= this.maxRetries) throw failure;
      const backoffMs = Math.min(250 * 2 ** attempt, 5_000);
      await sleep(failure.retryAfter !== null ? failure.retryAfter * 1000 : backoffMs, options.signal);
    }
  }

  /** POST /api/quickstart: a new agent; the answer holds api_key (shown once) and signing_key. */
  async register(name: string, intent: "buyer" | "seller" | "both" = "buyer", options?: CallOptions) {
    return (await this.request<RegisterResult>("POST", "/api/quickstart", { name, intent }, options)).body;
  }

  /** GET /api/execute/match: eligible providers for a task, in the order execute would try them. */
  async match(task: string, maxCost?: number, options?: CallOptions) {
    const query = new URLSearchParams({
      task,
      ...(maxCost === undefined ? {} : { max_cost: String(maxCost) }),
    });
    return (await this.request<MatchResult>("GET", `/api/execute/match?${query}`, undefined, options)).body;
  }

  /** POST /api/quotes: a binding price for one listing until expires_at. */
  async quote(
    listingId: string,
    extra: { input?: Record<string, unknown>; maxCost?: number } = {},
    options?: CallOptions,
  ) {
    const body = {
      listing_id: listingId,
      ...(extra.input ? { input: extra.input } : {}),
      ...(extra.maxCost === undefined ? {} : { max_cost: extra.maxCost }),
    };
    return (await this.request<Quote>("POST", "/api/quotes", body, options)).body;
  }

  /**
   * POST /api/execute: routes the task; answers the result, or the pending status when the run outlasts the
   * service's wait (then call waitForResult).
   */
  async execute(
    task: string,
    input: Record<string, unknown>,
    maxCost?: number,
    options: CallOptions & { quoteId?: string } = {},
  ): Promise<ExecuteResult | ExecutePending> {
    const body = {
      task,
      input,
      ...(maxCost === undefined ? {} : { constraints: { max_cost: maxCost } }),
      ...(options.quoteId ? { quote_id: options.quoteId } : {}),
    };
    return (await this.request<ExecuteResult | ExecutePending>("POST", "/api/execute", body, options)).body;
  }

  /** POST /api/invoke/{listing_id}: one listing, no fallback. */
  async invoke(
    listingId: string,
    input: Record<string, unknown>,
    options: CallOptions & { maxCost?: number; quoteId?: string } = {},
  ): Promise<ExecuteResult | ExecutePending> {
    const body = {
      input,
      ...(options.maxCost === undefined ? {} : { max_cost: options.maxCost }),
      ...(options.quoteId ? { quote_id: options.quoteId } : {}),
    };
    const path = `/api/invoke/${encodeURIComponent(listingId)}`;
    return (await this.request<ExecuteResult | ExecutePending>("POST", path, body, options)).body;
  }

  /** GET /api/execute/status/{invocation_id}. */
  async status(invocationId: string, options?: CallOptions) {
    const path = `/api/execute/status/${encodeURIComponent(invocationId)}`;
    return (await this.request<InvocationStatus>("GET", path, undefined, options)).body;
  }

  /** GET /api/commerce/receipts/{receipt_id}. */
  async receipt(receiptId: string, options?: CallOptions) {
    const path = `/api/commerce/receipts/${encodeURIComponent(receiptId)}`;
    return (await this.request<Receipt>("GET", path, undefined, options)).body;
  }

  /**
   * Polls an invocation until it has ended (succeeded or failed) or the deadline passes (TIMEOUT, retryable).
   * Waits as the service's Retry-After says, else a second; onProgress sees each status read.
   */
  async waitForResult(
    invocationId: string,
    opts: { timeoutMs?: number; signal?: AbortSignal; onProgress?: (status: InvocationStatus) => void } = {},
  ): Promise<InvocationStatus> {
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    for (;;) {
      const res = await this.request<InvocationStatus>(
        "GET",
        `/api/execute/status/${encodeURIComponent(invocationId)}`,
        undefined,
        { signal: opts.signal },
      );
      opts.onProgress?.(res.body);
      if (res.body.status === "succeeded" || res.body.status === "failed") return res.body;
      const after = Number(res.headers.get("retry-after") ?? "1");
      if (Date.now() + after * 1000 > deadline) {
        throw new AgentMarketError({
          code: "TIMEOUT",
          message: `invocation ${invocationId} had not ended by the deadline`,
          status: null,
          retryable: true,
        });
      }
      await sleep(Math.max(after, 0.2) * 1000, opts.signal);
    }
  }

  /** GET /api/wallet: balances, linked wallet, deposits, funding state. */
  async wallet(options?: CallOptions) {
    return (await this.request<Wallet>("GET", "/api/wallet", undefined, options)).body;
  }

  /** GET /api/wallet/pricing: fees, split, deposit terms and the chain. */
  async pricing(options?: CallOptions) {
    return (await this.request<Pricing>("GET", "/api/wallet/pricing", undefined, options)).body;
  }

  /** POST /api/capabilities: publish a listing (sellers). */
  async publish(listing: Record<string, unknown>, options?: CallOptions) {
    return (await this.request<ListingRecord>("POST", "/api/capabilities", listing, options)).body;
  }

  /** GET /api/seller/status: live listings, free slots, the bond rule, next best action. */
  async sellerStatus(options?: CallOptions) {
    return (await this.request<SellerStatus>("GET", "/api/seller/status", undefined, options)).body;
  }
}
