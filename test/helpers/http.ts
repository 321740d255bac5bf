import { getConfig } from "../../shared/config.js";
import { contractViolation } from "./response-contract.js";

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  /** A raw body string, sent as is (for malformed JSON). */
  raw?: string;
  headers?: Record<string, string>;
  baseUrl?: string;
}

/**
 * Calls the API under test and parses JSON when the answer is JSON. Every answer is checked against the
 * route's OpenAPI declaration (status and schema, errors included); a breach fails the calling test.
 */
export async function api<T = any>(
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined = options.raw;
  if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers["content-type"] ??= "application/json";
  const base = options.baseUrl ?? `http://127.0.0.1:${getConfig().port}`;
  const response = await fetch(`${base}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  if (response.headers.get("content-type")?.includes("json")) parsed = text ? JSON.parse(text) : undefined;
  const violation = contractViolation(
    method,
    response.url,
    response.status,
    response.headers.get("content-type"),
    parsed,
  );
  if (violation) throw new Error(`response contract: ${violation}\n${text.slice(0, 2000)}`);
  return { status: response.status, headers: response.headers, body: parsed as T, text };
}

/** Asserts nothing; returns the error code of an error envelope (or undefined). */
export function errorCode(response: ApiResponse): string | undefined {
  return response.body?.error?.code;
}
