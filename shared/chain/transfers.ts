import { type Address, isAddressEqual, type Log, parseEventLogs } from "viem";
import { ERC20_ABI } from "./client.js";

/** What proves money moved: one ERC-20 Transfer of exactly `value` of `token` from `from` to `to`. */
export interface ExpectedTransfer {
  token: Address;
  from: Address;
  to: Address;
  value: bigint;
}

/** The log of the expected Transfer in a receipt's logs, or undefined (settlements and payouts check this). */
export function findTransfer(logs: Log[], expected: ExpectedTransfer) {
  return parseEventLogs({ abi: ERC20_ABI, eventName: "Transfer", logs }).find(
    (l) =>
      isAddressEqual(l.address, expected.token) &&
      isAddressEqual(l.args.from, expected.from) &&
      isAddressEqual(l.args.to, expected.to) &&
      l.args.value === expected.value,
  );
}
