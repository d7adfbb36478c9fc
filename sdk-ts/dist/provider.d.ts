/**
 * The `Provider` interface a handler implements, and the `Registry` the runtime serves.
 *
 * @module
 */
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
export declare function providerFunc(kind: KindVersion, work: Provider["work"]): Provider;
/** The providers a worker serves, one per (kind, kindVersion). */
export declare class Registry {
    private entries_;
    constructor(providers?: Iterable<Provider>);
    /**
     * Adds a provider; returns the registry (builder style). Its `kind` may be a KindVersion
     * or any `{ kind, version }` object (e.g. from another copy of this package).
     */
    register(provider: Provider): this;
    /** The registered pairs, in registration order. */
    kinds(): KindVersion[];
    /** [pair, provider] in registration order. */
    entries(): Array<[KindVersion, Provider]>;
    /** The provider of (kind, version), if registered. */
    find(kind: string, version: number): Provider | undefined;
    /** How many providers are registered. */
    get size(): number;
    toString(): string;
    /** A checked copy, filtered to the kinds in `only` (the `WORKER_KINDS` filter). */
    validated(only?: readonly string[]): Registry;
}
/** Accepts a Registry, a single Provider or an iterable of providers. */
export declare function asRegistry(providers: Registry | Provider | Iterable<Provider>): Registry;
