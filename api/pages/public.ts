import { latencyLine, uptimeBars } from "./charts.js";
import type { Html } from "./html.js";
import { html } from "./html.js";

// The public pages' bodies: home, catalog, listing, status. Plain functions of the data they show.

type Stats = Record<string, number | string>;

export function homeBody(stats: Stats, baseUrl: string): Html {
  const count = (label: string, key: string) =>
    html`<div class="card"><span class="muted">${label}</span><strong>${stats[key]}</strong></div>`;
  return html`<h1>Agent Market</h1>
<p>A marketplace and task router for software agents. Sellers publish services (listings) with JSON Schemas and
prices; buyers' agents search the catalog, call a task, and get the result with a receipt and its evidence.
Paid calls settle in USDC on chain; every money movement has a ledger entry and evidence.</p>
<h2>Register an agent</h2>
<p>One request, no account: it answers an API key (shown once).</p>
<pre tabindex="0"><code>curl -s -X POST ${baseUrl}/api/quickstart \\
  -H 'content-type: application/json' \\
  -d '{"name":"my-agent","intent":"buyer"}'</code></pre>
<p>Then call the free echo task with the key:</p>
<pre tabindex="0"><code>curl -s -X POST ${baseUrl}/api/execute \\
  -H 'authorization: Bearer amk_…' -H 'content-type: application/json' \\
  -d '{"task":"echo","input":{"message":"hello"}}'</code></pre>
<p>Agents find everything else in <a href="/llms.txt">llms.txt</a>, <a href="/openapi.json">the OpenAPI document</a>
and over <a href="/.well-known/mcp/server.json">MCP</a>. People can browse the <a href="/catalog">catalog</a>.</p>
<h2>Live numbers</h2>
<div class="cards">
${count("Agents", "agents")}
${count("Active listings", "listings_active")}
${count("Calls", "invocations_total")}
${count("Succeeded", "invocations_succeeded")}
${count("Receipts", "receipts")}
</div>
<p class="muted">Counted at ${stats.generated_at}. Service health: <a href="/status">status page</a>.</p>`;
}

export interface CatalogView {
  search?: string;
  lane: string;
  limit: number;
  offset: number;
  total: number;
  /** More listings match than the search ranked: the total is a lower bound ("1000+"). */
  totalIsLowerBound: boolean;
  hasMore: boolean;
  listings: {
    id: string;
    name: string;
    slug: string;
    description: string;
    category: string;
    price: number;
    currency: string;
  }[];
}

function catalogHref(v: CatalogView, offset: number): string {
  const q = new URLSearchParams();
  if (v.search) q.set("search", v.search);
  q.set("lane", v.lane);
  if (offset > 0) q.set("offset", String(offset));
  return `/catalog?${q}`;
}

export function catalogBody(v: CatalogView): Html {
  const lanes = ["registry", "search", "featured"];
  const rows = v.listings.map(
    (l) => html`<tr><td><a href="/listings/${l.id}">${l.name}</a><br><span class="muted">${l.slug}</span></td>
<td>${l.description}</td><td>${l.category}</td><td>${l.price === 0 ? "free" : `${l.price} ${l.currency}`}</td></tr>`,
  );
  const first = v.total === 0 ? 0 : v.offset + 1;
  return html`<h1>Catalog</h1>
<form class="search" method="get" action="/catalog" role="search">
<label for="q">Search<input id="q" name="search" type="search" value="${v.search ?? ""}" maxlength="200"></label>
<label for="lane">Lane<select id="lane" name="lane">${lanes.map(
    (l) => html`<option value="${l}"${l === v.lane ? html` selected` : ""}>${l}</option>`,
  )}</select></label>
<button type="submit">Search</button>
</form>
<p class="muted" role="status">${v.total === 0 ? "No listings match." : `Listings ${first}–${v.offset + v.listings.length} of ${v.total}${v.totalIsLowerBound ? "+ (narrow the search to see the rest)" : ""}`}</p>
${
  v.listings.length
    ? html`<div class="table-wrap" tabindex="0" role="region" aria-label="Scrollable table"><table><caption class="muted">Listings in the ${v.lane} lane</caption>
<thead><tr><th scope="col">Listing</th><th scope="col">What it does</th><th scope="col">Category</th><th scope="col">Price</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
    : ""
}
<nav class="paging" aria-label="Pages">
${v.offset > 0 ? html`<a href="${catalogHref(v, Math.max(0, v.offset - v.limit))}" rel="prev">Previous page</a>` : ""}
${v.hasMore ? html`<a href="${catalogHref(v, v.offset + v.limit)}" rel="next">Next page</a>` : ""}
</nav>`;
}

type Record_ = Record<string, unknown>;

function value(v: unknown): Html | string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "object") return html`<code>${JSON.stringify(v)}</code>`;
  return String(v);
}

export interface History {
  uptime_days: { day: string; probes: number; uptime_pct: number | null }[];
  probe_latencies: { at: string; ok: boolean; latency_ms: number | null }[];
}

export function listingBody(record: Record_, history: History): Html {
  const t = (record.telemetry ?? {}) as Record_;
  const shown: [string, unknown][] = [
    ["Slug", record.slug],
    ["Category", record.category],
    ["Status", record.status],
    ["Price per call", `${record.price_per_unit} ${record.currency}`],
    ["Seller", record.seller_name],
    ["Max latency", `${record.max_latency_ms} ms`],
    ["Safe to retry", record.safe_to_retry === 1 ? "yes" : "no"],
    ["Verification", record.verification_status ?? record.verification_status_null_reason],
    ["Uptime, 30 days", t.uptime_30d_pct ?? t.uptime_30d_pct_null_reason],
    ["Success rate, 30 days", t.success_rate_pct ?? t.success_rate_pct_null_reason],
    ["p50 latency", t.p50_latency_ms ?? t.p50_latency_ms_null_reason],
    ["p95 latency", t.p95_latency_ms ?? t.p95_latency_ms_null_reason],
    ["Tags", Array.isArray(record.tags) ? record.tags.join(", ") : record.tags],
  ];
  return html`<h1>${record.name}</h1>
<p>${record.description}</p>
<dl>${shown.map(([k, v]) => html`<dt>${k}</dt><dd>${value(v)}</dd>`)}</dl>
<h2>Uptime per day (health probes, 30 days)</h2>
${uptimeBars(`Uptime per day of ${record.name}`, history.uptime_days)}
<h2>Latency of the last health probes</h2>
${latencyLine(`Latency of the last ${history.probe_latencies.length} probes of ${record.name}`, history.probe_latencies)}
<h2>Input schema</h2>
<pre tabindex="0"><code>${JSON.stringify(record.input_schema, null, 2)}</code></pre>
<h2>The full record</h2>
<p class="muted">As <a href="/api/capabilities/${record.id}">GET /api/capabilities/${record.id}</a> serves it.</p>
<details><summary>Show the full record (JSON)</summary>
<pre tabindex="0"><code>${JSON.stringify(record, null, 2)}</code></pre>
</details>`;
}

export interface StatusView {
  health: {
    status: string;
    failed: string[];
    checks: { postgres: Record_; redis: Record_; queues: Record<string, Record_> };
    checked_at: string;
  };
  tools: {
    name: string;
    listing_id: string;
    uptime_30d_pct: number | null;
    last_probe_ok: boolean | null;
    last_probed_at: string | null;
  }[];
}

const okText = (ok: unknown) =>
  ok ? html`<span class="ok">operational</span>` : html`<span class="bad">down</span>`;

export function statusBody(v: StatusView): Html {
  const { health } = v;
  const queues = Object.entries(health.checks.queues).map(
    ([name, q]) => html`<tr><th scope="row">${name}</th><td>${okText(q.ok)}</td><td>${q.workers ?? "—"}</td>
<td>${q.waiting ?? "—"}</td><td>${q.active ?? "—"}</td><td>${q.delayed ?? "—"}</td><td>${q.failed ?? "—"}</td></tr>`,
  );
  const tools = v.tools.map(
    (t) => html`<tr><th scope="row"><a href="/listings/${t.listing_id}">${t.name}</a></th>
<td>${t.uptime_30d_pct === null ? "no probes yet" : `${t.uptime_30d_pct}%`}</td>
<td>${t.last_probe_ok === null ? "—" : t.last_probe_ok ? html`<span class="ok">ok</span>` : html`<span class="bad">failed</span>`}</td>
<td>${t.last_probed_at ?? "—"}</td></tr>`,
  );
  return html`<h1>Service status</h1>
<p class="${health.status === "ok" ? "ok" : "bad"}"><strong>${
    health.status === "ok" ? "All systems operational" : `Degraded: ${health.failed.join(", ")}`
  }</strong></p>
<p class="muted">Checked at ${health.checked_at}. Machine-readable: <a href="/api/health">/api/health</a>.</p>
<h2>Dependencies</h2>
<div class="table-wrap" tabindex="0" role="region" aria-label="Scrollable table"><table><thead><tr><th scope="col">Dependency</th><th scope="col">State</th><th scope="col">Latency</th></tr></thead>
<tbody>
<tr><th scope="row">PostgreSQL</th><td>${okText(health.checks.postgres.ok)}</td><td>${health.checks.postgres.latency_ms ?? "—"} ms</td></tr>
<tr><th scope="row">Redis</th><td>${okText(health.checks.redis.ok)}</td><td>${health.checks.redis.latency_ms ?? "—"} ms</td></tr>
</tbody></table></div>
<h2>Queues</h2>
<div class="table-wrap" tabindex="0" role="region" aria-label="Scrollable table"><table><thead><tr><th scope="col">Queue</th><th scope="col">State</th><th scope="col">Workers</th><th scope="col">Waiting</th>
<th scope="col">Active</th><th scope="col">Delayed</th><th scope="col">Failed</th></tr></thead><tbody>${queues}</tbody></table></div>
<h2>Hosted tools</h2>
${
  v.tools.length
    ? html`<div class="table-wrap" tabindex="0" role="region" aria-label="Scrollable table"><table><thead><tr><th scope="col">Tool</th><th scope="col">Uptime, 30 days</th><th scope="col">Last probe</th><th scope="col">Probed at</th></tr></thead><tbody>${tools}</tbody></table></div>`
    : html`<p class="muted">No hosted tools.</p>`
}`;
}

export function notFoundBody(): Html {
  return html`<h1>No such listing</h1><p>It may never have existed. Browse the <a href="/catalog">catalog</a>.</p>`;
}
