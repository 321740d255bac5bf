import { randomBytes, randomUUID } from "node:crypto";
import { type ListingRow, listingColumns } from "../../shared/catalog/store/listings.js";
import { type Db, db } from "../../shared/db/knex.js";
import { type Intent, registerAgent } from "../../shared/identity/agents.js";
import { parseUsdc } from "../../shared/kernel/money.js";
import {
  type InvocationRow,
  invocationColumns,
  type NewInvocation,
} from "../../shared/routing/store/invocations.js";

export interface TestAgent {
  agentId: string;
  apiKey: string;
}

/** A registered agent with a fresh API key, through the same domain call quickstart makes. */
export async function buildAgent(intent: Intent = "buyer"): Promise<TestAgent> {
  const reg = await registerAgent(`test-agent-${randomBytes(3).toString("hex")}`, intent, "test");
  return { agentId: reg.agentId, apiKey: reg.apiKey };
}

export interface ListingOverrides {
  endpointUrl: string;
  price?: number;
  slug?: string;
  safeToRetry?: boolean;
  maxLatencyMs?: number;
  inputSchema?: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  tags?: string[];
  status?: ListingRow["status"];
  featured?: boolean;
  verificationStatus?: ListingRow["verification_status"];
  category?: string;
  name?: string;
  description?: string;
  sellerId?: string;
  rateLimit?: number;
  concurrencyLimit?: number;
}

/** A listing row pointing at a test's own loopback server; its slug doubles as a unique task alias. */
export async function buildListing(overrides: ListingOverrides): Promise<ListingRow> {
  const slug = overrides.slug ?? `test-${randomBytes(5).toString("hex")}`;
  const [row] = await db()<ListingRow>("listings")
    .insert({
      slug,
      name: `Test listing ${slug}`,
      description: "created by a test",
      category: "testing",
      endpoint_url: overrides.endpointUrl,
      price_micros: parseUsdc(overrides.price ?? 0, "/price").toString(),
      input_schema: (overrides.inputSchema ?? { type: "object" }) as never,
      output_schema: (overrides.outputSchema ?? null) as never,
      tags: overrides.tags ?? [slug],
      safe_to_retry: overrides.safeToRetry ?? true,
      max_latency_ms: overrides.maxLatencyMs ?? 30000,
      status: overrides.status ?? "active",
      featured: overrides.featured ?? false,
      verification_status: overrides.verificationStatus ?? null,
      ...(overrides.category ? { category: overrides.category } : {}),
      ...(overrides.name ? { name: overrides.name } : {}),
      ...(overrides.description ? { description: overrides.description } : {}),
      seller_id: overrides.sellerId ?? null,
      rate_limit: overrides.rateLimit ?? 100,
      concurrency_limit: overrides.concurrencyLimit ?? 10,
    })
    .returning(listingColumns(db()) as never);
  return row!;
}

/** A free keyed execute of the listing by this buyer, as createInvocation would build it (no price, no cap). */
export function freeInvocationRow(
  buyer: { agentId: string; apiKeyId: string },
  listing: ListingRow,
  input: Record<string, unknown>,
): NewInvocation {
  return {
    id: randomUUID(),
    agent_id: buyer.agentId,
    api_key_id: buyer.apiKeyId,
    listing_id: listing.id,
    task: listing.slug,
    route: "execute",
    input,
    max_cost_micros: null,
    price_micros: 0n,
  };
}

/**
 * An invocation row alone, with no outbox row: nothing will enqueue it, so a test drives it by calling
 * processExecution itself (other files' sweepers share this database and would otherwise pick it up).
 */
export async function insertInvocation(q: Db, row: NewInvocation): Promise<InvocationRow> {
  const [inserted] = await q<InvocationRow>("invocations")
    .insert(invocationColumns(row) as never)
    .returning("*");
  return inserted!;
}
