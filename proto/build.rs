//! Generates the Rust WorkerService code from `converge/worker/v1/worker.proto` with protox
//! (a pure-Rust protobuf compiler), so no system `protoc` is needed.

use std::{env, fs, path::PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "converge/worker/v1/worker.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["."])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    // The encoded descriptor set also feeds gRPC server reflection.
    fs::write(out.join("worker_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        // A rollup carries thousands of resources: their byte fields (ids, spec, status) are
        // slices of the received frame instead of one allocation and copy each.
        .bytes(".converge.worker.v1.Resource")
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
