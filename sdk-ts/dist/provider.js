/**
 * The `Provider` interface a handler implements, and the `Registry` the runtime serves.
 *
 * @module
 */
import { RegistryError } from "./errors.js";
import { KindVersion } from "./types.js";
/** A provider made of a function: `providerFunc(new KindVersion("hello"), async (req) => ...)`. */
export function providerFunc(kind, work) {
    return { kind, work };
}
/** The providers a worker serves, one per (kind, kindVersion). */
export class Registry {
    entries_ = [];
    constructor(providers = []) {
        for (const p of providers) {
            this.register(p);
        }
    }
    /**
     * Adds a provider; returns the registry (builder style). Its `kind` may be a KindVersion
     * or any `{ kind, version }` object (e.g. from another copy of this package).
     */
    register(provider) {
        const kv = provider.kind;
        if (typeof kv !== "object" ||
            kv === null ||
            typeof kv.kind !== "string" ||
            typeof kv.version !== "number") {
            throw new RegistryError(`a provider's kind must be a KindVersion, got ${JSON.stringify(kv)}`);
        }
        const { kind, version } = kv;
        this.entries_.push([kv instanceof KindVersion ? kv : new KindVersion(kind, version), provider]);
        return this;
    }
    /** The registered pairs, in registration order. */
    kinds() {
        return this.entries_.map(([kv]) => kv);
    }
    /** [pair, provider] in registration order. */
    entries() {
        return [...this.entries_];
    }
    /** The provider of (kind, version), if registered. */
    find(kind, version) {
        return this.entries_.find(([kv]) => kv.kind === kind && kv.version === version)?.[1];
    }
    /** How many providers are registered. */
    get size() {
        return this.entries_.length;
    }
    toString() {
        return `Registry([${this.entries_.map(([kv]) => kv.toString()).join(", ")}])`;
    }
    /** A checked copy, filtered to the kinds in `only` (the `WORKER_KINDS` filter). */
    validated(only) {
        const seen = new Set();
        for (const [kv] of this.entries_) {
            if (!kv.kind) {
                throw new RegistryError("a provider has an empty kind");
            }
            if (!Number.isInteger(kv.version) || kv.version < 1) {
                throw new RegistryError(`provider for kind ${JSON.stringify(kv.kind)} has version ${kv.version}; versions start at 1`);
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
export function asRegistry(providers) {
    if (providers instanceof Registry) {
        return providers;
    }
    if (isProvider(providers)) {
        return new Registry([providers]);
    }
    return new Registry(providers);
}
function isProvider(v) {
    return typeof v === "object" && v !== null && "kind" in v && "work" in v;
}
//# sourceMappingURL=provider.js.map