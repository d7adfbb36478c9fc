//! The transport settings both ends of the WorkerService read from the environment, so the
//! broker and every SDK accept the same values and name them the same way:
//! `GRPC_MAX_MESSAGE_BYTES` (the largest message either side sends or accepts, decompressed)
//! and, on the worker side, `GRPC_COMPRESSION` (whether the worker gzips what it sends).

/// The variable that sets the message size limit.
pub const MAX_MESSAGE_BYTES_VAR: &str = "GRPC_MAX_MESSAGE_BYTES";

/// The variable that turns on gzip for what a worker sends (SDKs only: the broker answers in
/// gzip exactly the clients that send gzip).
pub const COMPRESSION_VAR: &str = "GRPC_COMPRESSION";

/// Default largest message (decoded), in bytes. A compose of a very large bill of materials
/// is the biggest frame; 64 MiB bounds memory per stream while leaving room for about
/// 200,000 small children.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The most `GRPC_MAX_MESSAGE_BYTES` may be: the original implementation's cap, room for a
/// compose result of about a million small children (about 280 MB). Beyond it one frame
/// would pin more memory than a broker should give a single worker.
pub const MAX_MESSAGE_BYTES_CEILING: usize = 512 * 1024 * 1024;

/// The least `GRPC_MAX_MESSAGE_BYTES` may be: gRPC's own default receive limit. Below it
/// an ordinary rollup page or a mid-sized compose no longer fits.
pub const MAX_MESSAGE_BYTES_FLOOR: usize = 4 * 1024 * 1024;

/// Parses a `GRPC_MAX_MESSAGE_BYTES` value: a whole number of bytes within
/// [`MAX_MESSAGE_BYTES_FLOOR`]..=[`MAX_MESSAGE_BYTES_CEILING`]. `Err` says what is wrong
/// (the caller names the variable).
pub fn parse_max_message_bytes(v: &str) -> Result<usize, String> {
    let v = v.trim();
    let n: u64 = v.parse().map_err(|_| {
        format!("{v:?} is not a whole number of bytes (e.g. 536870912 for 512 MiB)")
    })?;
    let range = MAX_MESSAGE_BYTES_FLOOR as u64..=MAX_MESSAGE_BYTES_CEILING as u64;
    if !range.contains(&n) {
        return Err(format!(
            "{n} is outside {MAX_MESSAGE_BYTES_FLOOR}..={MAX_MESSAGE_BYTES_CEILING} \
             (4 MiB to 512 MiB)"
        ));
    }
    Ok(usize::try_from(n).expect("at most 512 MiB"))
}

/// Parses a `GRPC_COMPRESSION` value: `gzip` is `true`, `none` or `identity` is `false`.
pub fn parse_compression(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "gzip" => Ok(true),
        "none" | "identity" => Ok(false),
        other => Err(format!("{other:?} is not one of gzip, none")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_bytes_within_the_range_only() {
        assert_eq!(parse_max_message_bytes(" 536870912 "), Ok(512 << 20));
        assert_eq!(parse_max_message_bytes("4194304"), Ok(4 << 20));
        for bad in ["536870913", "4194303", "0", "-1", "64MiB", "1e9", ""] {
            let e = parse_max_message_bytes(bad).unwrap_err();
            assert!(e.contains("bytes") || e.contains("outside"), "{bad}: {e}");
        }
        assert!(
            parse_max_message_bytes("1073741824")
                .unwrap_err()
                .contains("512 MiB")
        );
    }

    #[test]
    fn compression_is_gzip_or_none() {
        assert_eq!(parse_compression("gzip"), Ok(true));
        assert_eq!(parse_compression(" GZIP "), Ok(true));
        assert_eq!(parse_compression("none"), Ok(false));
        assert_eq!(parse_compression("identity"), Ok(false));
        assert!(
            parse_compression("zstd")
                .unwrap_err()
                .contains("gzip, none")
        );
    }
}
