/**
 * A subprocess worker for the kill test: serves conf-leaf, sleeping `spec.sleep_ms` first
 * and appending `start <name>` / `done <name>` lines to $SLOW_LOG.
 */

import { appendFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";

import { KindVersion, Outcome, runWorker } from "../src/index.js";

const log = (line: string): void => appendFileSync(process.env["SLOW_LOG"] ?? "/dev/null", `${line}\n`);

await runWorker([
  {
    kind: new KindVersion("conf-leaf", 1),
    async work(req) {
      log(`start ${req.resource.name}`);
      const ms = req.specObject()["sleep_ms"];
      await delay(typeof ms === "number" ? ms : 0, undefined, { signal: req.signal });
      log(`done ${req.resource.name}`);
      return new Outcome({ status: { worker: "slow" } });
    },
  },
]);
