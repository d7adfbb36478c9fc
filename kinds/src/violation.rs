//! A kind's answer in its own terms: where a value breaks a rule, which rule, and what is
//! wrong. Each door turns it into its own failure: the API into a 422 problem's located
//! errors, the broker into a task's terminal failure message (through [`fmt::Display`]).

use std::fmt;

use crate::text::{MAX_LOCATION, MAX_MESSAGE, clipped};

/// One way a document breaks a kind's rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where: a JSON pointer into the checked document (under the prefix the caller gave, e.g.
    /// `/spec/size`), `""` for the whole document. At most [`MAX_LOCATION`] bytes.
    pub pointer: String,
    /// The JSON Schema keyword that failed (`maxLength`, `type`, ...), for a schema's
    /// violation; `None` for a rule no keyword names.
    pub keyword: Option<String>,
    /// What is wrong, for a person. At most [`MAX_MESSAGE`] bytes; it quotes a value by a
    /// short prefix at most, and never a secret.
    pub message: String,
}

impl Violation {
    /// A violation at `pointer` that no schema keyword names (both clipped to their caps).
    pub fn new(pointer: impl fmt::Display, message: impl fmt::Display) -> Violation {
        Violation {
            pointer: clipped(MAX_LOCATION, pointer),
            message: clipped(MAX_MESSAGE, message),
            keyword: None,
        }
    }

    /// A violation of schema keyword `keyword` (both texts clipped to their caps).
    pub fn of_keyword(
        pointer: impl fmt::Display,
        keyword: &str,
        message: impl fmt::Display,
    ) -> Violation {
        Violation {
            keyword: Some(keyword.to_string()),
            ..Violation::new(pointer, message)
        }
    }
}

/// `at /size: "big" is not of type "integer" (rule "type")`: one line, as a failure message
/// carries it (the whole document reads `at /`).
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "at {at}: {}", self.message)?;
        if let Some(k) = &self.keyword {
            write!(f, " (rule {k:?})")?;
        }
        Ok(())
    }
}

/// A document's violations: at most [`crate::text::MAX_LISTED`] described, and how many more
/// were found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Violations {
    /// The described ones, in the validator's order.
    pub errors: Vec<Violation>,
    /// How many more there were.
    pub omitted: usize,
}

impl Violations {
    /// Whether the document broke nothing.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty() && self.omitted == 0
    }
}
