// viem's RPC errors carry the request URL in their message and details. It strips basic-auth
// credentials but not an API key in the path or the query string (Alchemy /v2/<key>, ?apikey=…), so
// logs get a summary instead of the error object.

/** A loggable summary of an RPC failure that never includes the RPC URL. */
export function rpcErrorSummary(err: unknown): { error_name: string; error: string } {
  const e = err as { name?: unknown; shortMessage?: unknown; message?: unknown } | null;
  const name = typeof e?.name === "string" ? e.name : "Error";
  const short = typeof e?.shortMessage === "string" ? e.shortMessage : undefined;
  const message = short ?? (typeof e?.message === "string" ? e.message.split("\n")[0]! : String(err));
  return { error_name: name, error: message.replace(/https?:\/\/\S+/g, "<rpc url>") };
}
