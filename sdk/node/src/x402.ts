import type { Account } from "viem";

// Optional: pays the x402 edge for an agent without an API key (sdk/node/README.md "x402"). Needs the
// official packages as peers (@x402/fetch, @x402/evm) and a viem account holding USDC on the service's
// network; loaded only when this module is imported, so the core SDK stays dependency-free.

export interface X402PayerOptions {
  baseUrl: string;
  account: Account;
  /** The USDC contracts this payer may spend, per CAIP-2 network (the client refuses others). */
  allowedAssets?: { network: string; asset: string }[];
}

/** A fetch that answers a 402 from the edge by signing the payment and retrying once. */
export async function x402Fetch(options: X402PayerOptions): Promise<typeof fetch> {
  const [{ wrapFetchWithPayment, x402Client }, { ExactEvmScheme }] = await Promise.all([
    import("@x402/fetch"),
    import("@x402/evm/exact/client"),
  ]);
  // biome-ignore lint/suspicious/noExplicitAny: the scheme takes the viem account type of its own viem copy
  const client = new x402Client().register("eip155:*", new ExactEvmScheme(options.account as any));
  if (options.allowedAssets) client.setSpendControls({ allowedAssets: options.allowedAssets as never });
  return wrapFetchWithPayment(fetch, client);
}

/** Invokes one listing over x402 (no key): the answer body, with the settlement the edge reports. */
export async function payAndInvoke(
  options: X402PayerOptions,
  listingId: string,
  input: Record<string, unknown>,
): Promise<{ status: number; body: unknown; settlement: unknown }> {
  const pay = await x402Fetch(options);
  const res = await pay(
    `${options.baseUrl.replace(/\/$/, "")}/api/x402/invoke/${encodeURIComponent(listingId)}`,
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input }),
    },
  );
  const header = res.headers.get("payment-response");
  return {
    status: res.status,
    body: await res.json(),
    settlement: header ? JSON.parse(Buffer.from(header, "base64").toString("utf8")) : null,
  };
}
