//! The converge WorkerService contract and the domain model both sides of it share.
//!
//! `worker::v1` is generated from `proto/converge/worker/v1/worker.proto` at build time.
//! `manifest` holds the KindManifest model and its validation (the SDK half of the DB's
//! `validate_kind_manifest` CHECK); `wire` the transport settings (message size limit,
//! compression) both ends read from the environment.

pub mod compat;
pub mod duration;
pub mod json_pointer;
pub mod manifest;
pub mod wire;

/// Generated code for the `converge.worker.v1` protobuf package.
pub mod worker {
    /// Version 1 of the worker contract.
    pub mod v1 {
        #![allow(missing_docs, clippy::all)]
        tonic::include_proto!("converge.worker.v1");

        /// The encoded FileDescriptorSet of `worker.proto`, for gRPC server reflection.
        pub const FILE_DESCRIPTOR_SET: &[u8] =
            include_bytes!(concat!(env!("OUT_DIR"), "/worker_descriptor.bin"));
    }
}

pub use worker::v1 as pb;

/// Largest gRPC message either side accepts (decoded) unless `GRPC_MAX_MESSAGE_BYTES` says
/// otherwise, in bytes (see [`wire`]).
pub const MAX_MESSAGE_BYTES: usize = wire::DEFAULT_MAX_MESSAGE_BYTES;
