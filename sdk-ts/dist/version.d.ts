/**
 * The SDK's version and the identity sent in `Subscribe.sdk`.
 *
 * @module
 */
/** This package's version (kept equal to package.json's by a test). */
export declare const VERSION = "0.1.0";
/** The SDK identity a worker sends in `Subscribe.sdk`. */
export declare const SDK = "ts/0.1.0";
