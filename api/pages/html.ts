import { randomBytes } from "node:crypto";
import { Reply } from "../route.js";

// Server-rendered pages for people (docs/operations.md "Pages"): small template functions over one
// escaping tagged template. Every interpolated value is escaped unless it is already Html; there is no
// script at all, and the one <style> carries the response's CSP nonce.

/** Markup that is already safe (built by `html` or the chart functions). */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(value: unknown): string {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join("");
  if (value === null || value === undefined || value === false) return "";
  return escapeHtml(value);
}

/** The escaping template tag: `html\`<p>${name}</p>\`` escapes name. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

const STYLE = `
:root{color-scheme:light dark;--fg:#1b1f24;--bg:#fff;--muted:#57606a;--line:#d0d7de;--accent:#0b57d0;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--muted:#9da7b3;--line:#30363d;--accent:#6cb6ff;--ok:#3fb950;--bad:#ff7b72;--warn:#d29922}}
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,sans-serif;color:var(--fg);background:var(--bg)}
header,main,footer{max-width:64rem;margin:0 auto;padding:0 1rem}
header{display:flex;flex-wrap:wrap;gap:.5rem 1.25rem;align-items:center;border-bottom:1px solid var(--line);padding-block:.75rem}
header .brand{font-weight:700;margin-right:auto}
a{color:var(--accent)}a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
h1{font-size:1.6rem;margin:1.25rem 0 .5rem}h2{font-size:1.2rem;margin:1.5rem 0 .5rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}th,td{border-bottom:1px solid var(--line);padding:.35rem .5rem;text-align:left;vertical-align:top}
.table-wrap{overflow-x:auto}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}
pre{overflow:auto;background:color-mix(in srgb,var(--line) 30%,transparent);padding:.75rem;border-radius:6px;font-size:.85rem}
code{overflow-wrap:anywhere}
.muted{color:var(--muted)}.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(10rem,1fr));gap:.75rem}
.card{border:1px solid var(--line);border-radius:8px;padding:.75rem}.card strong{display:block;font-size:1.4rem}
form.inline{display:inline}input,select,button{font:inherit;padding:.35rem .5rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg)}
button{cursor:pointer;background:var(--accent);color:#fff;border-color:var(--accent)}
.search{display:flex;flex-wrap:wrap;gap:.5rem;align-items:end}.search label{display:flex;flex-direction:column;font-size:.9rem}
nav.paging{display:flex;gap:1rem;margin:1rem 0}
svg.chart{display:block;max-width:100%;height:auto;border:1px solid var(--line);border-radius:6px}
footer{border-top:1px solid var(--line);margin-top:2rem;padding-block:1rem;font-size:.9rem;color:var(--muted)}
`;

export interface PageOptions {
  title: string;
  /** Cache-Control; public pages may be cached briefly, operator pages never. */
  cache?: string;
  status?: number;
  headers?: Record<string, string>;
}

/**
 * The whole document and its answer: a strict CSP (nothing but this response's own nonce'd style and
 * same-origin or data: images; no script, no frames, forms only to this origin), nosniff, no referrer.
 */
export function page(options: PageOptions, body: Html): Reply {
  const nonce = randomBytes(16).toString("base64");
  const doc = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${options.title} · Agent Market</title>
<style nonce="${nonce}">${new Html(STYLE)}</style>
</head>
<body>
<header>
<a class="brand" href="/">Agent Market</a>
<nav aria-label="Main"><a href="/catalog">Catalog</a> · <a href="/status">Status</a> · <a href="/admin">Operators</a></nav>
</header>
<main id="main">
${body}
</main>
<footer>Agents: read <a href="/llms.txt">/llms.txt</a> and <a href="/openapi.json">/openapi.json</a>. Operators: <a href="/metrics">/metrics</a>.</footer>
</body>
</html>
`;
  return new Reply(
    options.status ?? 200,
    doc.value,
    {
      "Content-Security-Policy": `default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
      "X-Content-Type-Options": "nosniff",
      "Referrer-Policy": "no-referrer",
      "Cache-Control": options.cache ?? "no-store",
      ...options.headers,
    },
    "text/html",
  );
}
