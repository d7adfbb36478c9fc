/**
 * A no-op leaf worker for throughput benchmarks of the TypeScript SDK.
 *
 * Serves kind `$BENCH_KIND` (or `$NOOP_KIND`; default `benchleaf`, the Rust bench harness's
 * kind) at version 1 and answers every task at once with an empty outcome, like the other
 * SDKs' no-op workers. The usual worker environment applies (BROKER_ADDR,
 * WORKER_MAX_PARALLEL, WORKER_NAME, ...). Runs until SIGTERM/SIGINT.
 *
 *     converge-bench --n 20000 --workers 1 --preload --worker-cmd "node sdk-ts/build/bench/noop-worker.js"
 */

import { KindVersion, Outcome, initLogging, runWorker } from "converge-sdk";

const kind = process.env["BENCH_KIND"] || process.env["NOOP_KIND"] || "benchleaf";

initLogging();
await runWorker([{ kind: new KindVersion(kind, 1), work: () => new Outcome() }]);
