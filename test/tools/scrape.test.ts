import { createServer, type Server, type ServerResponse } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { scrapePage } from "../../shared/tools/scrape/scrape.js";

// The built-in scraper against local pages (loopback is allowlisted in tests, nothing else is): an
// article, an SPA shell, a huge page, a deep page, a redirect chain ending at a private address, a slow
// drip, a non-HTML answer.

const ARTICLE = `<!doctype html><html><head><title>The Rust Book: Ownership</title></head><body>
<nav><a href="/home">Home</a> <a href="/about">About</a></nav>
<article><h1>Understanding Ownership</h1>
${Array.from({ length: 12 }, (_, i) => `<p>Ownership is Rust's most unique feature, paragraph ${i}, and it enables memory safety guarantees without needing a garbage collector. <a href="/ch04-0${i % 3}">chapter link</a></p>`).join("\n")}
<pre><code>let s = String::from("hello");</code></pre></article>
<footer>Copyright footer text</footer><script>window.evil = 1</script></body></html>`;

const SPA = `<!doctype html><html><head><title>App</title></head><body><div id="root"></div><script src="/bundle.js"></script></body></html>`;

let server: Server;
let base: string;
const original = getConfig();

function page(res: ServerResponse, body: string, type = "text/html; charset=utf-8") {
  res.writeHead(200, { "content-type": type });
  res.end(body);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url ?? "/";
    if (path === "/article") return page(res, ARTICLE);
    if (path === "/spa") return page(res, SPA);
    if (path === "/latin1") {
      res.writeHead(200, { "content-type": "text/html; charset=iso-8859-1" });
      return res.end(
        Buffer.from(
          "<html><head><title>Caf\xe9</title></head><body><p>d\xe9j\xe0 vu</p></body></html>",
          "latin1",
        ),
      );
    }
    if (path === "/huge")
      return page(res, `<html><body>${"<p>filler text</p>".repeat(20_000)}</body></html>`);
    if (path === "/deep") return page(res, `<html><body>${"<div>".repeat(50_000)}deep</body></html>`);
    if (path === "/json") return page(res, '{"a":1}', "application/json");
    if (path === "/missing") {
      res.writeHead(404, { "content-type": "text/html" });
      return res.end("<p>no</p>");
    }
    if (path === "/hop1") {
      res.writeHead(302, { location: "/hop2" });
      return res.end();
    }
    if (path === "/hop2") {
      res.writeHead(302, { location: "http://10.20.30.40/internal" });
      return res.end();
    }
    if (path === "/hop-ok") {
      res.writeHead(301, { location: "/article" });
      return res.end();
    }
    if (path === "/drip") {
      res.writeHead(200, { "content-type": "text/html" });
      res.write("<html><body>");
      const timer = setInterval(() => res.write("<p>drip</p>"), 100);
      res.on("close", () => clearInterval(timer));
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

afterEach(() => {
  overrideConfig(original);
});

describe("the built-in scraper", () => {
  it("answers an article's main content as Markdown with its title, without nav, footer or scripts", async () => {
    const { output } = await scrapePage({ url: `${base}/article` });
    expect(output).toMatchObject({
      provider: "builtin",
      final_url: `${base}/article`,
      truncated: false,
      main_content_found: true,
    });
    expect(output.title).toContain("Ownership");
    expect(output.markdown).toContain("Ownership is Rust's most unique feature, paragraph 11");
    expect(output.markdown).toContain("```");
    expect(output.markdown).not.toContain("Copyright footer");
    expect(output.markdown).not.toContain("window.evil");
    // Relative links are resolved against the page's URL (the <base> Readability needs on linkedom).
    expect(output.markdown).toContain(`(${base}/ch04-00)`);
    expect(output.html).toBeUndefined();
  });

  it("answers html and absolute http(s) links when asked, the whole page without only_main_content", async () => {
    const { output } = await scrapePage({
      url: `${base}/article`,
      formats: ["html", "links", "markdown"],
      only_main_content: false,
    });
    expect(output.links).toEqual(
      expect.arrayContaining([`${base}/home`, `${base}/about`, `${base}/ch04-01`]),
    );
    expect(output.links!.every((l) => l.startsWith("http"))).toBe(true);
    expect(output.markdown).toContain("Copyright footer");
    expect(output.html).toContain("<article>");
    expect(output.html).not.toContain("window.evil");
  });

  it("cuts each format to max_length and flags truncated", async () => {
    const { output } = await scrapePage({
      url: `${base}/article`,
      formats: ["markdown", "html"],
      max_length: 1000,
    });
    expect(output.markdown!.length).toBeLessThanOrEqual(1000);
    expect(output.html!.length).toBeLessThanOrEqual(1000);
    expect(output.truncated).toBe(true);
  });

  it("follows a redirect to a public page and reports the final URL", async () => {
    const { output } = await scrapePage({ url: `${base}/hop-ok` });
    expect(output.final_url).toBe(`${base}/article`);
    expect(output.markdown).toContain("Understanding Ownership");
  });

  it("answers an SPA shell with what is there, not an error", async () => {
    const { output } = await scrapePage({ url: `${base}/spa`, formats: ["markdown", "links"] });
    expect(output).toMatchObject({ title: "App", links: [], truncated: false });
    expect(output.markdown).toBe("");
  });

  it("decodes the declared charset", async () => {
    const { output } = await scrapePage({ url: `${base}/latin1`, only_main_content: false });
    expect(output.title).toBe("Café");
    expect(output.markdown).toContain("déjà vu");
  });

  it("cuts a page deeper than the guard instead of building it", async () => {
    const { output } = await scrapePage({ url: `${base}/deep`, only_main_content: false });
    expect(output.truncated).toBe(true);
  });

  it("refuses a page over SCRAPE_MAX_BYTES with 502 page_too_large", async () => {
    overrideConfig({ ...original, scrapeMaxBytes: 65_536 });
    await expect(scrapePage({ url: `${base}/huge` })).rejects.toMatchObject({
      code: "PROVIDER_FAILED",
      details: { reason: "page_too_large" },
    });
  });

  it("refuses a redirect chain that ends at a private address, with 400 url_not_public", async () => {
    await expect(scrapePage({ url: `${base}/hop1` })).rejects.toMatchObject({
      code: "SCHEMA_VALIDATION_FAILED",
      details: { reason: "url_not_public" },
    });
  });

  it.each([
    "http://127.0.0.2:9/",
    "http://[::1]/",
    "http://10.0.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/",
    "http://intranet/",
    "http://user:pw@example.com/",
  ])("refuses %s before fetching, with 400 url_not_public", async (url) => {
    await expect(scrapePage({ url })).rejects.toMatchObject({
      code: "SCHEMA_VALIDATION_FAILED",
      details: { reason: "url_not_public", violations: [expect.objectContaining({ path: "/input/url" })] },
    });
  });

  it("gives up on a slow drip at SCRAPE_TIMEOUT_MS with 504 TIMEOUT", async () => {
    overrideConfig({ ...original, scrapeTimeoutMs: 1000 });
    await expect(scrapePage({ url: `${base}/drip` })).rejects.toMatchObject({
      code: "TIMEOUT",
      details: { reason: "page_timeout" },
    });
  });

  it("fails a non-HTML answer and a 404 page as the provider's failure (502), never a fake result", async () => {
    await expect(scrapePage({ url: `${base}/json` })).rejects.toMatchObject({
      code: "PROVIDER_FAILED",
      details: { reason: "page_not_html" },
    });
    await expect(scrapePage({ url: `${base}/missing` })).rejects.toMatchObject({
      code: "PROVIDER_FAILED",
      details: { reason: "page_http_error", page_status: 404 },
    });
  });
});
