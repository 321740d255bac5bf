import { PaymentNetworkRecord, paymentNetworkRecord } from "../../shared/x402/index.js";
import { defineRoute, Reply, type RouteDef } from "../route.js";

// The payment network record (spec "Payment network record"). It reports each gateway endpoint as served
// or not from the route list itself, so a rail is never called execution_ready for a route that is absent.

export function x402Routes(allRoutes: () => RouteDef[]): RouteDef[] {
  let served: ReadonlySet<string> | undefined;
  const servedRoutes = () => {
    served ??= new Set(allRoutes().map((r) => `${r.method} ${r.path}`));
    return served;
  };
  return [
    defineRoute({
      method: "get",
      path: "/api/x402/info",
      tag: "x402",
      summary: "Payment network record: networks, assets, endpoints, flow and the chain descriptor",
      description:
        "Built from configuration and the live paid-execution gate on every read (Cache-Control: no-store). " +
        "execution_ready is true only while paid execution is enabled and the x402 execute route is served.",
      auth: "none",
      responses: { 200: PaymentNetworkRecord },
      async handle() {
        return new Reply(200, await paymentNetworkRecord(servedRoutes()), { "Cache-Control": "no-store" });
      },
    }),
  ];
}
