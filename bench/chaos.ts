import { parseArgs } from "node:util";
import { formatSummary, summarise } from "./chaos/report.js";
import { LONG_PROFILE, runChaos } from "./chaos/run.js";

// `npm run chaos [-- --seconds N --kills N --seed N]`: the long chaos run (docs/reliability.md "Chaos").
// Exits 1 when anything was lost, charged or paid out twice, or an invariant broke.

const { values } = parseArgs({
  options: {
    seconds: { type: "string" },
    kills: { type: "string" },
    seed: { type: "string" },
    clients: { type: "string" },
  },
});
const number = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number(v));
const profile = {
  ...LONG_PROFILE,
  seconds: number(values.seconds, LONG_PROFILE.seconds),
  kills: number(values.kills, LONG_PROFILE.kills),
  seed: number(values.seed, LONG_PROFILE.seed),
  clients: number(values.clients, LONG_PROFILE.clients),
};
const result = await runChaos(profile, (m) => console.error(m));
console.log(formatSummary(result));
const s = summarise(result);
process.exit(s.lost + s.doubleCharges + s.doublePayouts + s.violations === 0 ? 0 : 1);
