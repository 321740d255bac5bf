import { randomUUID } from "node:crypto";
import type { Random } from "./random.js";

// A careful client: every write carries an idempotency key, and a failure that may be transient (no
// answer, a 5xx with no outcome, 409 in use, 429) is retried with the SAME key and body, on either web
// process, until it gets an outcome or its deadline passes.

export interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

export interface Sent {
  /** The last answer; undefined when no attempt got one before the deadline. */
  answer: Answer | undefined;
  attempts: number;
  /** How many attempts got each kind of answer (`answerLabel`): what an operation that got no outcome kept seeing. */
  seen: Record<string, number>;
}

const REQUEST_TIMEOUT_MS = 20_000;

export class ChaosClient {
  constructor(
    private readonly baseUrls: string[],
    private readonly random: Random,
    /** How long one operation keeps retrying. */
    private readonly retryForMs: number,
  ) {}

  /** One HTTP request to a random web process; throws on a connection error or timeout. */
  async request(
    method: string,
    path: string,
    opts: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Answer> {
    const base = this.random.pick(this.baseUrls);
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {}
    return { status: res.status, body, headers: res.headers };
  }

  /**
   * Sends until `done(answer)` says the answer is an outcome, retrying what may be transient with the
   * same request. `done` defaults to "has an invocation id, or is a refusal that is not retryable".
   */
  async send(
    method: string,
    path: string,
    opts: { key?: string; body?: unknown; headers?: Record<string, string> },
    done: (a: Answer) => boolean = isOutcome,
  ): Promise<Sent> {
    const deadline = Date.now() + this.retryForMs;
    let attempts = 0;
    let last: Answer | undefined;
    const seen: Record<string, number> = {};
    for (;;) {
      attempts += 1;
      let answer: Answer | undefined;
      try {
        answer = await this.request(method, path, opts);
      } catch {
        // No answer (connection refused or reset, timeout): the same request again.
      }
      const label = answer ? answerLabel(answer) : "no answer";
      seen[label] = (seen[label] ?? 0) + 1;
      if (answer) {
        last = answer;
        if (done(answer)) return { answer, attempts, seen };
      }
      if (Date.now() >= deadline) return { answer: last, attempts, seen };
      await new Promise((r) => setTimeout(r, this.random.int(200, 800)));
    }
  }
}

/** The invocation an answer names: the result's id, or the id in a failed call's error details. */
export function invocationIdOf(body: any): string | undefined {
  return body?.invocation_id ?? body?.error?.details?.invocation_id ?? undefined;
}

/** An outcome: it names an invocation, or refuses with a code that retrying the same request won't change. */
export function isOutcome(a: Answer): boolean {
  if (invocationIdOf(a.body)) return true;
  return !isTransient(a);
}

export function isTransient(a: Answer): boolean {
  if (a.status >= 500 || a.status === 429) return true;
  return a.status === 409 && a.body?.error?.code === "IDEMPOTENCY_KEY_IN_USE";
}

/** An answer in a few words: its status, error code and the reason its details give (the gate's, say). */
export function answerLabel(a: Answer): string {
  const error = a.body?.error;
  if (!error?.code) return String(a.status);
  const reason = error.details?.reason;
  return `${a.status} ${error.code}${typeof reason === "string" ? `/${reason}` : ""}`;
}

export const newKey = () => `chaos-${randomUUID()}`;
