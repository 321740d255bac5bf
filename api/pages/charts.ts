import { escapeHtml, Html } from "./html.js";

// Small inline SVG charts (no script, no external asset): styled by attributes only, so the page's
// CSP needs no style for them. Each has a <title> and role="img" with an accessible name.

const W = 300;
const H = 60;

/** One bar per day, its height the day's uptime (grey when no probes); `label` names the chart. */
export function uptimeBars(label: string, days: { day: string; uptime_pct: number | null }[]): Html {
  if (days.length === 0) return new Html(`<p class="muted">${escapeHtml(label)}: no health probes yet.</p>`);
  const slot = W / Math.max(days.length, 1);
  const bars = days
    .map((d, i) => {
      const pct = d.uptime_pct ?? 0;
      const h = Math.max(2, (pct / 100) * (H - 4));
      const fill =
        d.uptime_pct === null ? "#8c959f" : pct >= 99 ? "#1a7f37" : pct >= 90 ? "#9a6700" : "#cf222e";
      return `<rect x="${(i * slot + 1).toFixed(1)}" y="${(H - h).toFixed(1)}" width="${Math.max(1, slot - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${fill}"><title>${escapeHtml(d.day)}: ${d.uptime_pct === null ? "no probes" : `${d.uptime_pct}%`}</title></rect>`;
    })
    .join("");
  return new Html(
    `<svg class="chart" role="img" aria-label="${escapeHtml(label)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" xmlns="http://www.w3.org/2000/svg"><title>${escapeHtml(label)}</title>${bars}</svg>`,
  );
}

/** A polyline of latencies (failed probes as red dots on the baseline). */
export function latencyLine(label: string, points: { ok: boolean; latency_ms: number | null }[]): Html {
  if (points.length === 0)
    return new Html(`<p class="muted">${escapeHtml(label)}: no health probes yet.</p>`);
  const max = Math.max(1, ...points.map((p) => p.latency_ms ?? 0));
  const step = points.length > 1 ? (W - 8) / (points.length - 1) : 0;
  const xy = points.map((p, i) => ({
    x: 4 + i * step,
    y: H - 4 - ((p.latency_ms ?? 0) / max) * (H - 8),
    ok: p.ok && p.latency_ms !== null,
  }));
  const line = xy
    .filter((p) => p.ok)
    .map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`)
    .join(" ");
  const failures = xy
    .filter((p) => !p.ok)
    .map((p) => `<circle cx="${p.x.toFixed(1)}" cy="${H - 4}" r="2.5" fill="#cf222e"/>`)
    .join("");
  return new Html(
    `<svg class="chart" role="img" aria-label="${escapeHtml(label)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" xmlns="http://www.w3.org/2000/svg"><title>${escapeHtml(label)} (max ${max} ms)</title>${line ? `<polyline points="${line}" fill="none" stroke="#0b57d0" stroke-width="2"/>` : ""}${failures}</svg>`,
  );
}
