// Builds src/app.js into a component with componentize-js's API (the jco CLI's componentize
// command could not read a WIT directory here: its wasm-tools runs with no preopened
// directory). Called by ../build-js.sh, which assembles the WIT directory first.
//
//   node build.mjs WIT_DIR OUT
import { readFile, writeFile } from 'node:fs/promises';
import { componentize } from '@bytecodealliance/componentize-js';

const [witPath, out] = process.argv.slice(2);
if (!witPath || !out) {
  console.error('usage: node build.mjs WIT_DIR OUT');
  process.exit(2);
}
const source = await readFile(new URL('./src/app.js', import.meta.url), 'utf8');
const { component } = await componentize(source, {
  witPath,
  worldName: 'js-handler',
  // No outgoing HTTP or fetch event: the host links neither, and a handler needs neither.
  disableFeatures: ['http', 'fetch-event'],
});
await writeFile(out, component);
console.log(`build.mjs: ${out}: ${component.length} bytes`);
