/**
 * Scratch directories for tests, removed when the test process exits (each test file runs
 * in a process of its own).
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made: string[] = [];

process.on("exit", () => {
  for (const dir of made) {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A fresh directory under the system temp dir, named `sdkts-<prefix>-...`. */
export function scratch(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `sdkts-${prefix}-`));
  made.push(dir);
  return dir;
}
