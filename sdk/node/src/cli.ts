#!/usr/bin/env node
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { AgentMarket } from "./client.js";
import { AgentMarketError } from "./errors.js";

// `npx agentmarket <command>` (sdk/node/README.md "CLI"). Exit codes: 0 done; 1 usage; 2 the service
// refused (not retryable); 3 retryable or unreachable (try again later); 4 the call ran and failed.

const USAGE = `usage: agentmarket <command> [options]
  register <name> [--intent buyer|seller|both]   create an agent; stores its key (0600)
  match <task> [--max-cost USDC]                 rank providers for a task
  quote <listing_id> [--input JSON] [--max-cost USDC]
  execute <task> --input JSON [--max-cost USDC] [--quote ID]   run it and wait for the result
  invoke <listing_id> --input JSON [--max-cost USDC] [--quote ID]
  status <invocation_id>
  receipt <receipt_id>
  publish <listing.json>                         publish a listing (sellers)
options: --json (machine output)  --base-url URL (or AGENTMARKET_BASE_URL; default http://localhost:3000)
key: AGENTMARKET_API_KEY, else the one register stored in $AGENTMARKET_CONFIG_DIR or ~/.config/agentmarket`;

const configDir = () => process.env.AGENTMARKET_CONFIG_DIR ?? join(homedir(), ".config", "agentmarket");
const configFile = () => join(configDir(), "config.json");

function storedKey(): string | undefined {
  try {
    return (JSON.parse(readFileSync(configFile(), "utf8")) as { api_key?: string }).api_key;
  } catch {
    return undefined;
  }
}

function storeKey(apiKey: string, agentId: string, baseUrl: string): void {
  mkdirSync(configDir(), { recursive: true, mode: 0o700 });
  writeFileSync(
    configFile(),
    `${JSON.stringify({ api_key: apiKey, agent_id: agentId, base_url: baseUrl }, null, 2)}\n`,
    {
      mode: 0o600,
    },
  );
  chmodSync(configFile(), 0o600);
}

class UsageError extends Error {}

function json(text: string | undefined, what: string): Record<string, unknown> {
  if (text === undefined) return {};
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new UsageError(`${what} is not JSON: ${text}`);
  }
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: "boolean", default: false },
      "base-url": { type: "string" },
      intent: { type: "string", default: "buyer" },
      input: { type: "string" },
      "max-cost": { type: "string" },
      quote: { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  const [command, arg] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return values.help ? 0 : 1;
  }
  const baseUrl = values["base-url"] ?? process.env.AGENTMARKET_BASE_URL ?? "http://localhost:3000";
  const client = new AgentMarket({ baseUrl, apiKey: process.env.AGENTMARKET_API_KEY || storedKey() });
  const maxCost = values["max-cost"] === undefined ? undefined : Number(values["max-cost"]);
  if (maxCost !== undefined && !Number.isFinite(maxCost)) throw new UsageError("--max-cost must be a number");
  const need = (what: string) => {
    if (!arg) throw new UsageError(`${command} needs ${what}`);
    return arg;
  };
  const show = (value: unknown, line: string) => console.log(values.json ? JSON.stringify(value) : line);
  const tty = process.stderr.isTTY && !values.json;

  switch (command) {
    case "register": {
      const intent = values.intent as "buyer" | "seller" | "both";
      if (!["buyer", "seller", "both"].includes(intent))
        throw new UsageError("--intent is buyer, seller or both");
      const agent = await client.register(need("a name"), intent);
      storeKey(agent.api_key, agent.agent_id, baseUrl);
      show(
        { ...agent, stored_in: configFile() },
        `agent ${agent.agent_id} registered; key stored in ${configFile()}`,
      );
      return 0;
    }
    case "match": {
      const result = await client.match(need("a task"), maxCost);
      const rows = result.candidates as { name?: string; listing_id?: string; price_usdc?: string }[];
      show(
        result,
        rows.map((p, i) => `${i + 1}. ${p.name ?? p.listing_id} ${p.price_usdc ?? ""}`).join("\n") ||
          "no eligible provider",
      );
      return 0;
    }
    case "quote": {
      const quote = await client.quote(need("a listing id"), {
        input: values.input ? json(values.input, "--input") : undefined,
        maxCost,
      });
      show(quote, `quote ${quote.quote_id}: ${quote.price_usdc} USDC until ${quote.expires_at}`);
      return 0;
    }
    case "execute":
    case "invoke": {
      const input = json(values.input, "--input");
      const first =
        command === "execute"
          ? await client.execute(need("a task"), input, maxCost, { quoteId: values.quote })
          : await client.invoke(need("a listing id"), input, { maxCost, quoteId: values.quote });
      let final: unknown = first;
      let failed = (first as { success?: boolean }).success === false && !("status_url" in first);
      if ("status_url" in first && "invocation_id" in first) {
        if (tty) process.stderr.write(`running ${first.invocation_id} `);
        const done = await client.waitForResult(first.invocation_id, {
          timeoutMs: 120_000,
          onProgress: (s) => {
            if (tty) process.stderr.write(s.status === "running" ? "." : "");
          },
        });
        if (tty) process.stderr.write(` ${done.status}\n`);
        final = done;
        failed = done.status === "failed";
      }
      show(final, JSON.stringify(final, null, 2));
      return failed ? 4 : 0;
    }
    case "status": {
      const status = await client.status(need("an invocation id"));
      show(status, `${status.invocation_id}: ${status.status}`);
      return 0;
    }
    case "receipt": {
      const receipt = await client.receipt(need("a receipt id"));
      show(receipt, JSON.stringify(receipt, null, 2));
      return 0;
    }
    case "publish": {
      const file = need("a listing JSON file");
      let listing: Record<string, unknown>;
      try {
        listing = json(readFileSync(file, "utf8"), file);
      } catch (error) {
        if (error instanceof UsageError) throw error;
        throw new UsageError(`cannot read ${file}`);
      }
      const record = await client.publish(listing);
      show(record, `published ${(record as { id?: string }).id ?? ""}`);
      return 0;
    }
    default:
      throw new UsageError(`unknown command ${command}`);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (
      error instanceof UsageError ||
      (error as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION"
    ) {
      console.error(`${(error as Error).message}\n${USAGE}`);
      process.exit(1);
    }
    if (error instanceof AgentMarketError) {
      console.error(`${error.code}: ${error.message}`);
      if (error.envelope) console.error(JSON.stringify(error.envelope));
      process.exit(error.retryable ? 3 : 2);
    }
    console.error(error);
    process.exit(3);
  },
);
