/**
 * A converge worker in TypeScript: the `tsnote` kind writes each resource's text to a file.
 *
 *     node dist/worker.js manifest    # prints the kind's manifest, generated from the schemas below
 *     node dist/worker.js             # serves the kind (BROKER_ADDR, WORKER_NAME, ..., LOG_LEVEL)
 *
 * A `tsnote` resource's spec says what to write (`text`, `copies`); the worker writes
 * `<directory>/<name>.txt`, where the directory comes from the kind's provider config
 * (`NoteConfig`) or, without one, $NOTES_DIR (default /tmp/converge-notes). Its status says
 * where, how many bytes and the file's SHA-256. Deleting the resource runs the `teardown`
 * reaction, which removes the file before the resource goes (the manifest's finalizer).
 *
 * The manifest's spec, status and config schemas are generated from the zod schemas
 * `NoteSpec`, `NoteStatus` and `NoteConfig` (`kindManifest`), the same schemas the handler
 * parses and builds with: converge refuses a spec they would refuse, at apply.
 */

import { createHash } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { isAbsolute, join } from "node:path";

import {
  Condition,
  KindVersion,
  Outcome,
  type Provider,
  type ReactionRequest,
  Reactions,
  Stage,
  TerminalError,
  initLogging,
  kindManifest,
  runWorker,
} from "converge-sdk";
import { z } from "zod";

const kind = new KindVersion("tsnote", 1);
const FINALIZER = "examples.converge.dev/tsnote-file";

/** What a note says. A misspelt key is refused at apply (a strict object). */
const NoteSpec = z.strictObject({
  text: z.string().describe("The note's text, written once per copy."),
  copies: z.number().int().min(1).max(100).default(1),
});

/** What the worker reports. */
const NoteStatus = z.object({
  path: z.string(),
  bytes: z.number().int().min(0),
  sha256: z.string(),
  observed_generation: z.number().int(),
});

/** The kind's provider config: where notes are written. */
const NoteConfig = z.object({
  directory: z.string().describe("An absolute directory; created if missing."),
});

function manifest() {
  return kindManifest({
    kind,
    description: "A note written to a file by the TypeScript example worker (examples/ts-worker).",
    spec: NoteSpec,
    status: NoteStatus,
    config: NoteConfig,
    reactions: [Reactions.work(), Reactions.teardown()],
    finalizerName: FINALIZER,
    taskDeadlineSecs: 30,
  });
}

function notesDir(req: ReactionRequest): string {
  const cfg = NoteConfig.partial().safeParse(req.effectiveConfig() ?? {});
  return (cfg.success ? cfg.data.directory : undefined) ?? process.env["NOTES_DIR"] ?? "/tmp/converge-notes";
}

const note: Provider = {
  kind,
  async work(req: ReactionRequest): Promise<Outcome> {
    const dir = notesDir(req);
    if (!isAbsolute(dir)) {
      throw new TerminalError(`the notes directory ${JSON.stringify(dir)} is not absolute`);
    }
    const path = join(dir, `${req.resource.name}.txt`);
    if (req.stage === Stage.DELETE) {
      await rm(path, { force: true });
      console.error(`tsnote: removed ${path}`);
      return new Outcome();
    }
    // strip(): the handler ignores keys it does not know (a newer manifest may add one),
    // while the manifest's schema, from the strict object, refuses them at apply.
    const spec = req.spec(NoteSpec.strip().parse); // a spec that does not parse is terminal
    const body = `${spec.text}\n`.repeat(spec.copies);
    await mkdir(dir, { recursive: true });
    await writeFile(path, body); // a failure here is transient: retried with backoff
    console.error(`tsnote: wrote ${path} (${Buffer.byteLength(body)} bytes, generation ${req.generation})`);
    const status = NoteStatus.parse({
      path,
      bytes: Buffer.byteLength(body),
      sha256: createHash("sha256").update(body).digest("hex"),
      observed_generation: Number(req.generation),
    });
    return new Outcome({ status }).withCondition(
      Condition.ready(true, "Written", `${spec.copies} line(s) in ${path}`),
    );
  },
};

const args = process.argv.slice(2);
if (args.length === 1 && args[0] === "manifest") {
  process.stdout.write(`${JSON.stringify(manifest(), null, 2)}\n`);
} else if (args.length > 0) {
  process.stderr.write("usage: worker.js [manifest]\n");
  process.exitCode = 2;
} else {
  initLogging();
  console.error(`tsnote: serving ${kind} (broker ${process.env["BROKER_ADDR"] ?? "unset"})`);
  await runWorker([note]); // drains on SIGTERM/SIGINT
}
