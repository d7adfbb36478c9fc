//! RFC 6901 JSON pointers as converge's error locations and flow fields use them: one place
//! for escaping a token, splitting a pointer and ordering pointers in document order.

use std::cmp::Ordering;

/// `name` as one pointer token (`~` → `~0`, `/` → `~1`).
pub fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// One pointer token, unescaped.
pub fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// The unescaped tokens of a pointer (`""`, the whole document, has none).
pub fn tokens(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(unescape).collect()
}

/// Orders token lists in document order: token by token, array indices as numbers, a
/// pointer before those under it.
pub fn cmp_tokens<T: AsRef<str>>(a: &[T], b: &[T]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.as_ref(), y.as_ref());
        let o = match (x.parse::<usize>(), y.parse::<usize>()) {
            (Ok(i), Ok(j)) => i.cmp(&j),
            _ => x.cmp(y),
        };
        if o.is_ne() {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Orders two pointers in document order (see [`cmp_tokens`]); escaped tokens compare as
/// written, which keeps equal pointers equal.
pub fn cmp(a: &str, b: &str) -> Ordering {
    let a: Vec<&str> = a.split('/').collect();
    let b: Vec<&str> = b.split('/').collect();
    cmp_tokens(&a, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_order_in_document_order() {
        assert_eq!(tokens("/a~1b/c~0d/0"), ["a/b", "c~d", "0"]);
        assert!(tokens("").is_empty());
        assert_eq!(escape("a/b~c"), "a~1b~0c");
        assert_eq!(unescape(&escape("x/~y")), "x/~y");
        let mut ps = ["/r/10/x", "/r/2", "/r/2/y", "", "/a"];
        ps.sort_by(|a, b| cmp(a, b));
        assert_eq!(ps, ["", "/a", "/r/2", "/r/2/y", "/r/10/x"]);
    }
}
