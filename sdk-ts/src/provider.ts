/**
 * The `Provider` interface a handler implements, and the `Registry` the runtime serves.
 *
 * @module
 */

import { RegistryError } from "./errors.js";
import { KindVersion, type Outcome, type ProviderConfig, type ReactionRequest } from "./types.js";

/**
 * Handler code for one (kind, kindVersion).
 *
 * Set `kind` to the `KindVersion` served and implement `work`. A provider handles every
 * reaction of its kind: switch on `req.reaction` or `req.stage` when the kind declares
 * several. Throw `TerminalError` to stop retries until the spec changes, `TransientError`
 * (or anything else) to be retried. Returning nothing is an empty `Outcome`.
 */
export interface Provider {
  /** The pair this provider serves; the version must be at least 1. */
  readonly kind: KindVersion;
  /** Runs one task. Long handlers should watch `req.signal`. */
  // biome-ignore lint/suspicious/noConfusingVoidType: a handler may return nothing (an empty Outcome).
  work(req: ReactionRequest): Promise<Outcome | void> | Outcome | void;
  /**
   * Called with the kind's default provider config when first loaded and on every push
   * (both parts empty: the config was deleted or never existed). Must not block.
   */
  onConfig?(cfg: ProviderConfig): void;
  /**
   * Whether the provider can take tasks now; polled, and re-checked after each config push.
   * A flip tells the broker to stop (or resume) sending this kind's tasks. Absent: ready.
   */
  ready?(): boolean;
}

/** A provider made of a function: `providerFunc(new KindVersion("hello"), async (req) => ...)`. */
export function providerFunc(kind: KindVersion, work: Provider["work"]): Provider {
  return { kind, work };
}

/** The providers a worker serves, one per (kind, kindVersion). */
export class Registry {
  private entries_: Array<[KindVersion, Provider]> = [];

  constructor(providers: Iterable<Provider> = []) {
    for (const p of providers) {
      this.register(p);
    }
  }

  /**
   * Adds a provider; returns the registry (builder style). Its `kind` may be a KindVersion
   * or any `{ kind, version }` object (e.g. from another copy of this package).
   */
  register(provider: Provider): this {
    const kv: unknown = provider.kind;
    if (
      typeof kv !== "object" ||
      kv === null ||
      typeof (kv as KindVersion).kind !== "string" ||
      typeof (kv as KindVersion).version !== "number"
    ) {
      throw new RegistryError(`a provider's kind must be a KindVersion, got ${JSON.stringify(kv)}`);
    }
    const { kind, version } = kv as KindVersion;
    this.entries_.push([kv instanceof KindVersion ? kv : new KindVersion(kind, version), provider]);
    return this;
  }

  /** The registered pairs, in registration order. */
  kinds(): KindVersion[] {
    return this.entries_.map(([kv]) => kv);
  }

  /** [pair, provider] in registration order. */
  entries(): Array<[KindVersion, Provider]> {
    return [...this.entries_];
  }

  /** The provider of (kind, version), if registered. */
  find(kind: string, version: number): Provider | undefined {
    return this.entries_.find(([kv]) => kv.kind === kind && kv.version === version)?.[1];
  }

  /** How many providers are registered. */
  get size(): number {
    return this.entries_.length;
  }

  toString(): string {
    return `Registry([${this.entries_.map(([kv]) => kv.toString()).join(", ")}])`;
  }

  /** A checked copy, filtered to the kinds in `only` (the `WORKER_KINDS` filter). */
  validated(only?: readonly string[]): Registry {
    const seen = new Set<string>();
    for (const [kv] of this.entries_) {
      if (!kv.kind) {
        throw new RegistryError("a provider has an empty kind");
      }
      if (!Number.isInteger(kv.version) || kv.version < 1) {
        throw new RegistryError(
          `provider for kind ${JSON.stringify(kv.kind)} has version ${kv.version}; versions start at 1`,
        );
      }
      if (seen.has(kv.toString())) {
        throw new RegistryError(`${kv} is registered twice`);
      }
      seen.add(kv.toString());
    }
    let entries = this.entries_;
    if (only !== undefined) {
      const unknown = only.filter((k) => entries.every(([kv]) => kv.kind !== k));
      if (unknown.length > 0) {
        throw new RegistryError(`WORKER_KINDS names kinds no provider serves: ${unknown.join(", ")}`);
      }
      entries = entries.filter(([kv]) => only.includes(kv.kind));
    }
    if (entries.length === 0) {
      throw new RegistryError("no providers registered");
    }
    const out = new Registry();
    out.entries_ = [...entries];
    return out;
  }
}

/** Accepts a Registry, a single Provider or an iterable of providers. */
export function asRegistry(providers: Registry | Provider | Iterable<Provider>): Registry {
  if (providers instanceof Registry) {
    return providers;
  }
  if (isProvider(providers)) {
    return new Registry([providers]);
  }
  return new Registry(providers);
}

function isProvider(v: unknown): v is Provider {
  return typeof v === "object" && v !== null && "kind" in v && "work" in v;
}
