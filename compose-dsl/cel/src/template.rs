//! Splits a template string into literal text and `${...}` expressions.
//!
//! `"${expr}"` alone is a *whole* expression and keeps the value's type; any other mix is
//! interpolated as a string. `$${` writes a literal `${`. The closing brace is found by
//! tracking nested braces and skipping CEL string literals, so `${ {'a': 1}['a'] }` works.

/// One piece of a template string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Literal text.
    Text(String),
    /// The source of one `${...}` expression (without the delimiters).
    Expr(String),
}

/// A parsed template string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// No expressions: the string as written (with `$${` unescaped).
    Literal(String),
    /// Exactly `${expr}`: the value keeps its type.
    Whole(String),
    /// Text and expressions mixed: rendered as a string.
    Mixed(Vec<Piece>),
}

/// Parses one template string.
pub(crate) fn parse(s: &str) -> Result<Parsed, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        text.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            text.push_str("${");
            rest = after;
        } else if let Some(body) = tail.strip_prefix("${") {
            let end = closing_brace(body).ok_or_else(|| format!("unterminated ${{ in {s:?}"))?;
            let expr = body[..end].trim();
            if expr.is_empty() {
                return Err(format!("empty ${{}} in {s:?}"));
            }
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(Piece::Expr(expr.to_owned()));
            rest = &body[end + 1..];
        } else {
            text.push('$');
            rest = &tail[1..];
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(match pieces.as_slice() {
        [] => Parsed::Literal(String::new()),
        [Piece::Text(t)] => Parsed::Literal(t.clone()),
        [Piece::Expr(e)] => Parsed::Whole(e.clone()),
        _ => Parsed::Mixed(pieces),
    })
}

/// The byte index of the `}` closing an expression body, skipping nested braces and
/// quoted strings (with backslash escapes).
fn closing_brace(body: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(parse("plain").unwrap(), Parsed::Literal("plain".into()));
        assert_eq!(parse("${spec.a}").unwrap(), Parsed::Whole("spec.a".into()));
        assert_eq!(
            parse("${ spec.a }").unwrap(),
            Parsed::Whole("spec.a".into())
        );
        assert_eq!(
            parse("${root.name}-vpc").unwrap(),
            Parsed::Mixed(vec![
                Piece::Expr("root.name".into()),
                Piece::Text("-vpc".into())
            ])
        );
        assert_eq!(parse("cost $5").unwrap(), Parsed::Literal("cost $5".into()));
        assert_eq!(parse("$${x}").unwrap(), Parsed::Literal("${x}".into()));
        assert_eq!(
            parse("${ {'a': '}'}['a'] }").unwrap(),
            Parsed::Whole("{'a': '}'}['a']".into())
        );
        assert!(parse("${spec.a").is_err());
        assert!(parse("${}").is_err());
    }
}
