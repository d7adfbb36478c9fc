//! The WorkerService's transport rules beyond tonic's defaults: gzip is answered in kind (a
//! worker that compresses what it sends gets compressed frames back, one that does not gets
//! plain frames), and a frame over the message limit ends its stream with a status that names
//! the limit and the variable that raises it.

use converge_proto::wire::{MAX_MESSAGE_BYTES_CEILING, MAX_MESSAGE_BYTES_VAR};
use tonic::{Code, Request, Status};

/// The interceptor type of [`mirror_compression`].
pub type MirrorCompression = fn(Request<()>) -> Result<Request<()>, Status>;

/// Keeps gzip for the responses of a call only when the caller sends gzip itself.
///
/// tonic compresses responses in any encoding the caller lists in `grpc-accept-encoding`,
/// and grpcio (the Python SDK's transport) lists gzip on every call whether or not it
/// compresses: every task frame to every Python worker would be gzipped, CPU on both ends
/// for frames of a few hundred bytes on a local network. Compression is the worker's choice
/// (`GRPC_COMPRESSION=gzip` in every SDK); the broker follows it.
pub fn mirror_compression(mut req: Request<()>) -> Result<Request<()>, Status> {
    let sends_gzip = req
        .metadata()
        .get("grpc-encoding")
        .is_some_and(|v| v.as_encoded_bytes().eq_ignore_ascii_case(b"gzip"));
    if !sends_gzip {
        req.metadata_mut().remove("grpc-accept-encoding");
    }
    Ok(req)
}

/// The status that ends a stream whose inbound half failed with `err`, if `err` is tonic's
/// refusal of a frame over the limit (OUT_OF_RANGE for a plain frame, RESOURCE_EXHAUSTED for
/// one that decompresses past it): RESOURCE_EXHAUSTED naming `limit` and the variable, so
/// the worker's log says what to change rather than only that the stream broke.
pub(crate) fn oversized(err: &Status, limit: usize) -> Option<Status> {
    matches!(err.code(), Code::OutOfRange | Code::ResourceExhausted).then(|| {
        Status::resource_exhausted(format!(
            "a WorkStream frame is over this broker's message limit of {limit} bytes: raise \
             {MAX_MESSAGE_BYTES_VAR} (at most {MAX_MESSAGE_BYTES_CEILING}) on the broker and \
             the worker ({})",
            err.message()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(headers: &[(&'static str, &'static str)]) -> Option<String> {
        let mut req = Request::new(());
        for (k, v) in headers {
            req.metadata_mut().insert(*k, v.parse().unwrap());
        }
        let req = mirror_compression(req).unwrap();
        req.metadata()
            .get("grpc-accept-encoding")
            .map(|v| v.to_str().unwrap().to_string())
    }

    #[test]
    fn gzip_back_only_to_a_caller_that_sends_gzip() {
        let listed = ("grpc-accept-encoding", "identity,deflate,gzip");
        assert_eq!(accepts(&[listed]), None);
        assert_eq!(accepts(&[listed, ("grpc-encoding", "identity")]), None);
        assert_eq!(
            accepts(&[listed, ("grpc-encoding", "gzip")]).as_deref(),
            Some("identity,deflate,gzip")
        );
    }

    #[test]
    fn an_oversized_frame_names_the_limit_and_the_variable() {
        let tonic = Status::out_of_range("found 70000000 bytes, the limit is: 67108864 bytes");
        let s = oversized(&tonic, 64 << 20).unwrap();
        assert_eq!(s.code(), Code::ResourceExhausted);
        for part in [
            "67108864",
            "GRPC_MAX_MESSAGE_BYTES",
            "536870912",
            "found 70000000",
        ] {
            assert!(s.message().contains(part), "{}", s.message());
        }
        assert!(oversized(&Status::cancelled("gone"), 1).is_none());
    }
}
