import type { Html } from "./html.js";
import { html } from "./html.js";

// The operator pages: sign-in, and the money console (the same data as GET /api/admin/money).

export function signInBody(problem?: string): Html {
  return html`<h1>Operator sign-in</h1>
<p>The money console is for the operator of this deployment. Sign in with the <code>ADMIN_API_KEY</code>;
the browser keeps an 8-hour session cookie (HttpOnly, SameSite=Strict), never the key.</p>
${problem ? html`<p class="bad" role="alert">${problem}</p>` : ""}
<form method="post" action="/admin/sign-in">
<p><label for="token">Admin key</label><br><input id="token" name="token" type="password" autocomplete="current-password" required size="40"></p>
<p><button type="submit">Sign in</button></p>
</form>`;
}

export function consoleOffBody(): Html {
  return html`<h1>Operator console</h1><p>This deployment has no <code>ADMIN_API_KEY</code>, so the operator console is off.</p>`;
}

type Evidence = { state: string; source: string; source_ref: string | null; created_at: string };
type Row = Record<string, unknown> & { evidence: Evidence[] };

function evidenceList(rows: Evidence[]): Html {
  if (rows.length === 0) return html`<span class="muted">none</span>`;
  return html`<ul>${rows.map((e) => html`<li>${e.state} · ${e.source}${e.source_ref ? html` <code>${e.source_ref}</code>` : ""}</li>`)}</ul>`;
}

function action(path: string, label: string, id: string): Html {
  return html`<form class="inline" method="post" action="${path}"><button type="submit" aria-label="${label} ${id}">${label}</button></form>`;
}

export interface ConsoleView {
  stuck_after_seconds: number;
  payouts: Row[];
  settlements: Row[];
  deposits: Row[];
  generated_at: string;
}

export function consoleBody(v: ConsoleView, notice?: string): Html {
  const payouts = v.payouts.map(
    (p) => html`<tr><td><code>${p.payout_id}</code></td><td>${p.status}</td><td>${p.amount_usdc} USDC</td>
<td>${p.failure_reason ?? p.waiting_reason ?? "—"}</td><td>${evidenceList(p.evidence)}</td>
<td>${action(`/admin/payouts/${p.payout_id}/retry`, p.status === "failed" ? "Retry" : "Re-drive", String(p.payout_id))}</td></tr>`,
  );
  const settlements = v.settlements.map(
    (s) => html`<tr><td><code>${s.settlement_id}</code></td><td>${s.status}</td><td>${s.amount_usdc} USDC</td>
<td>${s.failure_reason ?? "—"}</td><td>${evidenceList(s.evidence)}</td>
<td>${s.status === "settlement_failed" ? html`<span class="muted">final</span>` : action(`/admin/settlements/${s.settlement_id}/recheck`, "Re-check", String(s.settlement_id))}</td></tr>`,
  );
  const deposits = v.deposits.map(
    (d) => html`<tr><td><code>${d.deposit_id}</code></td><td>${d.status}</td><td>${d.amount_usdc ?? "—"}</td>
<td>${d.rejected_reason ?? d.waiting_reason ?? "—"}</td><td>${evidenceList(d.evidence)}</td>
<td>${d.status === "rejected" ? html`<span class="muted">final</span>` : action(`/admin/deposits/${d.deposit_id}/recheck`, "Re-check", String(d.deposit_id))}</td></tr>`,
  );
  const table = (caption: string, rows: Html[]) =>
    rows.length
      ? html`<div class="table-wrap" tabindex="0" role="region" aria-label="Scrollable table"><table><caption class="muted">${caption}</caption><thead><tr><th scope="col">Id</th><th scope="col">Status</th><th scope="col">Amount</th>
<th scope="col">Reason</th><th scope="col">Evidence</th><th scope="col">Action</th></tr></thead><tbody>${rows}</tbody></table></div>`
      : html`<p class="muted">None.</p>`;
  return html`<h1>Money console</h1>
${notice ? html`<p class="ok" role="status">${notice}</p>` : ""}
<p class="muted">Failed rows, and open rows untouched for ${v.stuck_after_seconds} s. Generated ${v.generated_at}.
Every action is idempotent and leaves an audit row. <a href="/admin/queues">Queue dashboard</a> · <a href="/metrics">Metrics</a>.</p>
<form class="inline" method="post" action="/admin/sign-out"><button type="submit">Sign out</button></form>
<h2>Payouts</h2>${table("Failed or stuck payouts", payouts)}
<h2>x402 settlements</h2>${table("Failed or stuck x402 settlements", settlements)}
<h2>Deposits</h2>${table("Rejected or stuck deposits", deposits)}`;
}
