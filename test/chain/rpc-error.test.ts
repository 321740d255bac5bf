import { HttpRequestError } from "viem";
import { describe, expect, it } from "vitest";
import { rpcErrorSummary } from "../../shared/chain/rpc-error.js";

describe("rpcErrorSummary", () => {
  it("keeps the error's name and short message but never the RPC URL or its key", () => {
    const err = new HttpRequestError({
      url: "https://base-mainnet.example.com/v2/SECRETKEY0123456789abcdef?apikey=ALSOSECRET",
      status: 500,
      body: { method: "eth_gasPrice" },
    });
    expect(JSON.stringify(err.message)).toContain("SECRETKEY");
    const summary = rpcErrorSummary(err);
    expect(summary.error_name).toBe("HttpRequestError");
    expect(JSON.stringify(summary)).not.toContain("SECRETKEY");
    expect(JSON.stringify(summary)).not.toContain("ALSOSECRET");
  });

  it("redacts URLs in a plain error's first line", () => {
    const summary = rpcErrorSummary(new Error("fetch failed for https://rpc.example.com/?key=zzz\nmore"));
    expect(summary).toEqual({ error_name: "Error", error: "fetch failed for <rpc url>" });
  });
});
