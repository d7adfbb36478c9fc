//! Conversions between UUIDs and their 16-byte wire form.

/// Decodes a 16-byte UUID from the wire; `None` for an empty or malformed field.
pub fn uuid_from_bytes(b: &[u8]) -> Option<[u8; 16]> {
    b.try_into().ok()
}

/// Formats 16 raw bytes as a hyphenated lowercase UUID string (for logs and errors).
pub fn uuid_string(b: &[u8]) -> String {
    match uuid_from_bytes(b) {
        Some(u) => {
            let h: String = u.iter().map(|x| format!("{x:02x}")).collect();
            format!(
                "{}-{}-{}-{}-{}",
                &h[0..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..32]
            )
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_uuid() {
        let b: Vec<u8> = (0u8..16).collect();
        assert_eq!(uuid_string(&b), "00010203-0405-0607-0809-0a0b0c0d0e0f");
        assert_eq!(uuid_string(&[1, 2]), "");
    }
}
