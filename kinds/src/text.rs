//! How a rule's answer quotes what it was given: every message about a value is bounded
//! whatever the value holds. A request value is quoted by a short prefix ([`quote`],
//! [`quote_value`]) and a message is built through [`clipped`], which stops formatting at its
//! cap, so a 15 MiB value failing 50 rules makes 50 short messages, never 50 copies of it.
//!
//! Every door that shows a kind's answer (the API's problems, the broker's failure messages)
//! uses these, so a value is quoted the same way wherever a rule refuses it.

use std::fmt::{self, Write as _};

use serde_json::Value;

/// The most located violations one answer lists (the rest are counted).
pub const MAX_LISTED: usize = 50;
/// The longest message of one violation, in bytes.
pub const MAX_MESSAGE: usize = 1024;
/// The longest location (JSON pointer or parameter name), in bytes.
pub const MAX_LOCATION: usize = 512;
/// How much of a value a message quotes, in bytes.
pub const QUOTE_BYTES: usize = 64;

/// What a cut text ends with.
pub const ELLIPSIS: char = '…';

/// A `fmt::Write` that keeps at most `cap` bytes and then refuses more, which stops the
/// `Display` writing into it (so formatting a huge value costs its first `cap` bytes only).
struct Clip {
    buf: String,
    cap: usize,
    cut: bool,
}

impl fmt::Write for Clip {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.cap - self.buf.len();
        if s.len() <= room {
            self.buf.push_str(s);
            return Ok(());
        }
        self.buf.push_str(&s[..s.floor_char_boundary(room)]);
        self.cut = true;
        Err(fmt::Error)
    }
}

/// `d` formatted, at most `cap` bytes of it (plus "…" when it was longer).
pub fn clipped(cap: usize, d: impl fmt::Display) -> String {
    let mut w = Clip {
        buf: String::new(),
        cap,
        cut: false,
    };
    // An error here is the clip itself (or a Display that failed): keep what was written.
    let _ = write!(w, "{d}");
    if w.cut {
        w.buf.push(ELLIPSIS);
    }
    w.buf
}

/// `s` clipped to `cap` bytes in place ("…" appended when cut).
pub fn clip_in_place(s: &mut String, cap: usize) {
    if s.len() > cap {
        s.truncate(s.floor_char_boundary(cap));
        s.push(ELLIPSIS);
    }
}

/// A string for a message: Rust-quoted (control characters escaped), at most
/// [`QUOTE_BYTES`] of it, `"abc…"` when longer.
pub fn quote(s: &str) -> String {
    if s.len() <= QUOTE_BYTES {
        return format!("{s:?}");
    }
    let mut q = format!("{:?}", &s[..s.floor_char_boundary(QUOTE_BYTES)]);
    q.insert(q.len() - 1, ELLIPSIS);
    q
}

/// A JSON value for a message: compact JSON, at most [`QUOTE_BYTES`] of it (a long string
/// reads `"abc…"`, a long array or object `[1,2,…`).
pub fn quote_value(v: &Value) -> String {
    match v {
        Value::String(s) if s.len() > QUOTE_BYTES => {
            let head = Value::String(s[..s.floor_char_boundary(QUOTE_BYTES)].to_string());
            let mut q = head.to_string();
            q.insert(q.len() - 1, ELLIPSIS);
            q
        }
        _ => clipped(QUOTE_BYTES, v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_and_clips_stop_at_their_caps() {
        assert_eq!(quote("ab"), "\"ab\"");
        let long = "é".repeat(100);
        let q = quote(&long);
        assert!(q.ends_with("…\"") && q.len() <= QUOTE_BYTES + 8, "{q}");
        let v = quote_value(&json!("x".repeat(1000)));
        assert_eq!(v, format!("\"{}…\"", "x".repeat(QUOTE_BYTES)));
        let arr = quote_value(&json!(vec![1; 1000]));
        assert!(arr.starts_with("[1,1,") && arr.ends_with('…'), "{arr}");
        assert_eq!(clipped(4, "abcdef"), "abcd…");
        assert_eq!(clipped(10, "abc"), "abc");
        let mut s = "abcdef".to_string();
        clip_in_place(&mut s, 3);
        assert_eq!(s, "abc…");
    }
}
