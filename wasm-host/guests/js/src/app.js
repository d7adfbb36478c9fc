// The JavaScript guest: a `converge:handler@0.1.0` component built from this module by
// componentize-js (wasm-host/guests/build-js.sh). It serves the conformance kinds
// (conformance/KINDS.md) as a pure handler can, exactly as the Rust guest's
// guests/rust/src/conformance.rs does, so the conformance suite runs it as its own form
// (`wasm-js`) beside the Rust guest's (`wasm`).
//
// What a component cannot do is left out rather than faked, as in the Rust guest: it writes
// no event log (stdworker journals its tasks), it cannot see the bundle (`conf-config`
// reports the effective config only), and it has no cooperative cancellation (the host
// enforces deadlines and cancellations by interrupting the instance).
//
// Shapes: jco's conventions for the WIT types. Records are objects with camelCase fields,
// enums are their kebab-case names as strings, `option<T>` is `undefined` or the value, s64
// is a BigInt, and an export returning `result<T, E>` returns T for ok and throws an error
// whose `payload` is E for err.

import { log } from 'converge:handler/log@0.1.0';
import { subscribeDuration } from 'wasi:clocks/monotonic-clock@0.2.10';

/** The form name the conformance statuses carry. */
const FORM = 'wasm-js';

/** The kind all children of `conf-composite` have; every conformance kind is version 1. */
const LEAF = 'conf-leaf';

/** Every kind served, all at version 1. */
const KINDS = [
  'conf-leaf',
  'conf-composite',
  'conf-final',
  'conf-fail',
  'conf-slow',
  'conf-hold',
  'conf-react',
  'conf-ready',
  'conf-config',
];

/** A handler error: `kind` is `transient` or `terminal`. */
class HandlerError extends Error {
  constructor(kind, message) {
    super(message);
    this.payload = { tag: kind, val: message };
  }
}

const terminal = (message) => new HandlerError('terminal', message);
const transient = (message) => new HandlerError('transient', message);

/** An outcome with nothing in it; `fields` fills some of it. */
function outcome(fields = {}) {
  return {
    status: undefined,
    conditions: [],
    children: [],
    edges: [],
    configs: [],
    operationOutput: undefined,
    ...fields,
  };
}

/** An outcome carrying only `status`. */
const withStatus = (status) => outcome({ status: JSON.stringify(status) });

/** A JSON document the host sent; a parse failure is a bug no retry fixes: terminal. */
function parse(what, json) {
  try {
    return JSON.parse(json);
  } catch (e) {
    throw terminal(`${what} is not valid JSON: ${e.message}`);
  }
}

/** An integer field of the spec, if present and integral (the lenient reading). */
function specInt(spec, key) {
  const v = spec?.[key];
  return Number.isInteger(v) ? v : undefined;
}

/** The request's numbers the statuses echo (s64 arrives as a BigInt). */
const num = (v) => (typeof v === 'bigint' ? Number(v) : v);

/** `work` of the leaf kinds: the spec echoed with what the host told the handler. */
function echo(req, spec) {
  return withStatus({
    echo: spec,
    form: FORM,
    generation: num(req.generation),
    attempt: req.attempt,
    trigger: req.trigger,
  });
}

/** Verb `ping`: the operation's input (null without one) and the target's name. */
function ping(req) {
  const input = req.operation?.input;
  const value = input === undefined ? null : parse('operation input', input);
  return outcome({ operationOutput: JSON.stringify({ pong: value, name: req.target.name }) });
}

/** The composite's child count: 2 by default, else an integer in 0..=50; anything else is
 * terminal (a composer must never guess its children: an empty list prunes them all). */
function childCount(spec) {
  if (!spec || !('children' in spec)) return 2;
  const v = spec.children;
  if (Number.isInteger(v) && v >= 0 && v <= 50) return v;
  throw terminal(`spec.children must be an integer in 0..=50, got ${JSON.stringify(v)}`);
}

/** `compose`: a chain of leaves, each waiting for the previous one and receiving its echoed
 * index through a value flow. */
function compose(req, spec) {
  const n = childCount(spec);
  const name = (i) => `${req.target.name}-${i}`;
  const leaf = (i) => ({ kind: LEAF, name: name(i) });
  const children = [];
  const edges = [];
  for (let i = 0; i < n; i++) {
    children.push({ kind: LEAF, kindVersion: 1, name: name(i), spec: JSON.stringify({ index: i }), labels: [] });
    if (i > 0) {
      edges.push({
        dependent: leaf(i),
        dependency: leaf(i - 1),
        values: [{ dependentField: '/upstream_index', sourceField: '/echo/index' }],
      });
    }
  }
  return outcome({ status: JSON.stringify({ composed: n }), children, edges });
}

/** `rollup`: how many descendants exist and how many are ready. */
function rollup(req, spec) {
  return withStatus({
    composed: childCount(spec),
    descendants: req.descendants.length,
    ready: req.descendants.filter((d) => d.isReady).length,
  });
}

/** The delete stage: transient failures for the first `delete_failures` attempts, then an
 * empty outcome releases the finalizer. */
function teardown(req, spec) {
  const failures = specInt(spec, 'delete_failures') ?? 0;
  if (failures > 0 && req.attempt <= failures) {
    throw transient(`teardown failure ${req.attempt}`);
  }
  return outcome();
}

/** `conf-fail` work: each failure class on demand. */
function fail(req, spec) {
  const ok = () => withStatus({ ok: true, attempt: req.attempt });
  const mode = typeof spec?.mode === 'string' ? spec.mode : 'ok';
  switch (mode) {
    case 'ok':
      return ok();
    case 'terminal':
      throw terminal('conformance terminal');
    case 'transient': {
      const times = specInt(spec, 'times') ?? 0;
      if (times === 0 || req.attempt <= times) throw transient(`conformance transient ${req.attempt}`);
      return ok();
    }
    case 'panic':
      // Not a handler error on purpose: an exception without a `payload` cannot be lowered
      // into the result's error type, so the component traps, the class this mode exists to
      // exercise (as a Rust guest's panic aborts).
      throw new TypeError('conformance panic');
    default:
      throw terminal(`unknown conf-fail mode ${JSON.stringify(mode)}`);
  }
}

/** `conf-slow` work: a real sleep on the host's clock. JavaScript has no blocking sleep, and
 * a spin on `Date.now()` would never end (the host fixes the guest's clocks); a WASI
 * monotonic-clock pollable, blocked on, makes the host wait while the guest runs nothing. */
function slow(req, spec) {
  const ms = Math.max(0, specInt(spec, 'sleep_ms') ?? 0);
  if (ms > 0) subscribeDuration(BigInt(ms) * 1_000_000n).block();
  return withStatus({ slept_ms: ms, attempt: req.attempt });
}

/** `conf-react` react: fails transiently while the attempt is at most the watched resource's
 * `react_failures`, then succeeds (the host journals the transition and dedup token). */
function react(req, spec) {
  const failures = specInt(spec, 'react_failures') ?? 0;
  if (req.attempt <= failures) throw transient(`react failure ${req.attempt}`);
  return outcome();
}

/** `conf-config` work: the effective config as the host passed it (null without one). */
function config(req) {
  return withStatus({ config: req.config === undefined ? null : parse('config', req.config) });
}

/** One task of a conformance kind; a stage the kind has nothing to do in is an empty outcome. */
function conformance(req) {
  const spec = () => parse('spec', req.target.spec);
  switch (`${req.kind} ${req.stage}`) {
    case 'conf-leaf work':
    case 'conf-final work':
    case 'conf-ready work':
      return echo(req, spec());
    case 'conf-leaf operate':
      return ping(req);
    case 'conf-composite compose':
      return compose(req, spec());
    case 'conf-composite rollup':
      return rollup(req, spec());
    case 'conf-final delete':
      return teardown(req, spec());
    case 'conf-fail work':
      return fail(req, spec());
    case 'conf-slow work':
    case 'conf-hold work':
      return slow(req, spec());
    case 'conf-react react':
      return react(req, spec());
    case 'conf-config work':
      return config(req);
    default:
      return outcome();
  }
}

export function describe() {
  return {
    name: 'converge-guest-js',
    version: '0.1.0',
    kinds: KINDS.map((kind) => ({ kind, version: 1 })),
  };
}

export function reconcile(req) {
  // One line per task, so a test (or an operator) can see the host forwards logs.
  log(
    'debug',
    `${req.kind} ${req.stage} reaction=${req.reaction} name=${req.target.name} ` +
      `generation=${req.generation} attempt=${req.attempt}`,
  );
  if (!KINDS.includes(req.kind)) throw terminal('unknown kind');
  return conformance(req);
}
