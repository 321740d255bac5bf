import { createServer, type Server } from "node:http";
import os from "node:os";
import { convert } from "html-to-text";
import { parseDocument as parseHtmlDocument } from "htmlparser2";
import { Lexer } from "marked";
import Papa from "papaparse";
import { overrideConfig } from "../shared/config.js";
import { decodeDocument, loadRunParser, runParse, runScrape } from "../shared/tools/index.js";
import { fixed, table } from "./lib.js";

/**
 * `npm run bench:tools`: document-parse throughput per format (MB/s) as a ratio to the bare parser
 * library on the same input — in process (our wrapper: decoding, typing, stats, bounds) and through the
 * tool's real path (a fresh worker thread per call, with its limits) — and built-in page-scrape latency
 * (p50/p99) on local pages served from loopback. Prints the figures measured in this one run; a
 * measurement, never a test.
 */

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const SCRAPES = Number(process.env.BENCH_SCRAPES ?? 40);

function log(message = ""): void {
  process.stdout.write(`${message}\n`);
}

function words(n: number, seed: number): string {
  const vocab = [
    "ownership",
    "borrow",
    "rust",
    "memory",
    "safety",
    "thread",
    "value",
    "scope",
    "heap",
    "stack",
  ];
  return Array.from({ length: n }, (_, i) => vocab[(i * 7 + seed) % vocab.length]).join(" ");
}

/** Deterministic documents within the tool's bounds, so both sides parse all of each. */
function documents(): Record<"csv" | "json" | "markdown" | "html", string> {
  const csv = [
    "id,price,ok,day,name,qty,ratio,note",
    ...Array.from(
      { length: 5000 },
      (_, i) =>
        `${i},${(i * 1.25).toFixed(2)},${i % 2 === 0},2026-01-${String((i % 28) + 1).padStart(2, "0")},item ${i},${i % 97},${(i / 7).toFixed(4)},${words(3, i)}`,
    ),
  ].join("\n");
  const json = JSON.stringify(
    Array.from({ length: 3000 }, (_, i) => ({
      id: i,
      name: `item ${i}`,
      tags: ["a", "b"],
      price: i * 1.5,
      meta: { ok: i % 2 === 0, note: words(6, i) },
    })),
  );
  const markdown = Array.from(
    { length: 450 },
    (_, i) =>
      `## Section ${i}\n\n${words(60, i)}\n\n- ${words(5, i)}\n- ${words(5, i + 1)}\n\n\`\`\`rust\nlet x${i} = ${i};\n\`\`\`\n`,
  ).join("\n");
  const html = `<html><head><title>Bench page</title></head><body>${Array.from(
    { length: 900 },
    (_, i) =>
      `<div class="c"><h2>Part ${i}</h2><p>${words(20, i)} <a href="https://e.example/${i}">link ${i}</a></p></div>`,
  ).join("")}</body></html>`;
  return { csv, json, markdown, html };
}

const BARE: Record<string, (text: string) => unknown> = {
  csv: (text) => Papa.parse(text, { delimiter: ",", skipEmptyLines: true }),
  json: (text) => JSON.parse(text),
  markdown: (text) => Lexer.lex(text, { gfm: true }),
  html: (text) => {
    parseHtmlDocument(text);
    return convert(text, { wordwrap: false });
  },
};

/** Median seconds of `runs` calls after two warm-up calls. */
async function medianSeconds(runs: number, fn: () => unknown): Promise<number> {
  await fn();
  await fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await fn();
    times.push((performance.now() - started) / 1000);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

async function parseBench(): Promise<void> {
  log(`document parse: median of ${RUNS} runs per cell; MB/s of input; ratio = tool ÷ bare library`);
  const runParser = await loadRunParser();
  const rows: string[][] = [];
  for (const [format, text] of Object.entries(documents()) as [
    keyof ReturnType<typeof documents>,
    string,
  ][]) {
    const mb = Buffer.byteLength(text) / 1_048_576;
    const input = { format, content: text };
    const bare = await medianSeconds(RUNS, () => BARE[format]!(text));
    const inProcess = await medianSeconds(RUNS, () => runParser(decodeDocument(input)));
    const worker = await medianSeconds(RUNS, () => runParse(input));
    const truncated = runParser(decodeDocument(input)).truncated;
    rows.push([
      format,
      fixed(mb * 1024, 0),
      fixed(mb / bare, 1),
      fixed(mb / inProcess, 1),
      fixed(bare / inProcess, 2),
      fixed(mb / worker, 1),
      fixed(bare / worker, 2),
      fixed(worker * 1000, 1),
      String(truncated),
    ]);
  }
  log(
    table(
      [
        "format",
        "KB",
        "bare MB/s",
        "tool in-process MB/s",
        "ratio",
        "tool via worker MB/s",
        "ratio",
        "worker ms/call",
        "truncated",
      ],
      rows,
    ),
  );
}

const ARTICLE = `<!doctype html><html><head><title>Ownership</title></head><body><nav>${Array.from({ length: 40 }, (_, i) => `<a href="/n${i}">nav ${i}</a>`).join(" ")}</nav><article><h1>Understanding Ownership</h1>${Array.from({ length: 120 }, (_, i) => `<p>${words(40, i)} <a href="/ch${i}">ref</a></p>`).join("")}<pre><code>let s = String::from("hello");</code></pre></article><footer>footer</footer></body></html>`;
const PAGES: Record<string, string> = {
  article: ARTICLE,
  "spa-shell": `<!doctype html><html><head><title>App</title></head><body><div id="root"></div><script src="/b.js"></script></body></html>`,
  "large (≈1 MB)": `<html><head><title>Large</title></head><body>${Array.from({ length: 6000 }, (_, i) => `<section><h3>${i}</h3><p>${words(25, i)}</p></section>`).join("")}</body></html>`,
};

async function scrapeBench(): Promise<void> {
  const server: Server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(PAGES[decodeURIComponent((req.url ?? "/").slice(1))] ?? "");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  log(`\npage scrape (built-in, markdown + links, only_main_content): ${SCRAPES} sequential calls per page`);
  const rows: string[][] = [];
  try {
    for (const [name, html] of Object.entries(PAGES)) {
      const url = `${base}/${encodeURIComponent(name)}`;
      await runScrape({ url, formats: ["markdown", "links"] });
      const times: number[] = [];
      for (let i = 0; i < SCRAPES; i++) {
        const started = performance.now();
        await runScrape({ url, formats: ["markdown", "links"] });
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      const at = (p: number) => times[Math.min(times.length - 1, Math.ceil(p * times.length) - 1)]!;
      rows.push([name, fixed(Buffer.byteLength(html) / 1024, 0), fixed(at(0.5), 1), fixed(at(0.99), 1)]);
    }
  } finally {
    server.closeAllConnections();
    server.close();
  }
  log(table(["page", "KB", "p50 ms", "p99 ms"], rows));
}

async function main(): Promise<void> {
  // Local pages are on loopback: exempt it from the public-address rule for this process only.
  overrideConfig({ outboundAllowlist: ["127.0.0.1"], scrapeProvider: "builtin", scrapeMaxBytes: 5_242_880 });
  log(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, Node ${process.version}`);
  await parseBench();
  await scrapeBench();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
