//! The database's words: the closed sets of text the engine stores and returns (a task's
//! type and trigger, a resource's phase, a binding's transition, an operation's state, ...),
//! each an enum whose variants are listed once, with their spelling, in a [`words!`] block.
//! That one list is the only mapping between a variant and its text: it gives `as_str` and
//! `parse`, the serde form, the sqlx encoding and decoding (a column of the set decodes
//! straight into the enum; a word the enum does not know is a decode error, never a silent
//! default), and, with the `openapi` feature, the OpenAPI schema (a string enum) the HTTP API
//! documents. Code compares enums, never strings.
//!
//! `engine/tests/words.rs` checks each set against the database that defines it: the CHECK
//! constraints and the generated `phase` column of the baseline migration, and the words the
//! engine's SQL writes into `work_queue`.

use std::{fmt, str::FromStr};

use sqlx::{
    Decode, Encode, Postgres, Type,
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef},
};

/// A text that is not a word of the set it was read as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{word:?} is not a {what} (one of {known})")]
pub struct UnknownWord {
    /// The set (`task type`, `phase`, ...).
    pub what: &'static str,
    /// The text read.
    pub word: String,
    /// The set's words, comma separated.
    pub known: String,
}

/// Joins doc-comment lines as utoipa's derive does (the common indent stripped, one line
/// each), so a set's OpenAPI description reads like any derived schema's.
#[cfg(feature = "openapi")]
fn doc_text(lines: &[&str]) -> String {
    let lines: Vec<&str> = lines.iter().map(|l| l.trim_end()).collect();
    let indent = lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.len() - l.trim_start_matches(' ').len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| if l.is_empty() { *l } else { &l[indent..] })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Declares a set of database words: the enum, and from its one `Variant = "text"` list,
/// everything that maps it to and from text (see the module's documentation).
macro_rules! words {
    (
        $(#[doc = $doc:literal])*
        pub enum $name:ident as $what:literal {
            $( $(#[doc = $vdoc:literal])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[doc = $vdoc])* $variant, )+
        }

        impl $name {
            /// Every word of the set, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spellings of [`Self::ALL`], in the same order.
            pub const TEXTS: &'static [&'static str] = &[$($text),+];

            /// The word as the database stores it and the API sends it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The word spelt `s`, if it is one of the set.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            fn unknown(word: &str) -> UnknownWord {
                UnknownWord {
                    what: $what,
                    word: word.to_owned(),
                    known: Self::TEXTS.join(", "),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownWord;

            fn from_str(s: &str) -> Result<Self, UnknownWord> {
                Self::parse(s).ok_or_else(|| Self::unknown(s))
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                Self::parse(&s).ok_or_else(|| serde::de::Error::unknown_variant(&s, Self::TEXTS))
            }
        }

        impl Type<Postgres> for $name {
            fn type_info() -> PgTypeInfo {
                <&str as Type<Postgres>>::type_info()
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                <&str as Type<Postgres>>::compatible(ty)
            }
        }

        impl Encode<'_, Postgres> for $name {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <&str as Encode<Postgres>>::encode(self.as_str(), buf)
            }
        }

        impl<'r> Decode<'r, Postgres> for $name {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                let s = <&str as Decode<Postgres>>::decode(value)?;
                Ok(s.parse::<$name>()?)
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                use utoipa::openapi::{ObjectBuilder, Type, schema::SchemaType};
                ObjectBuilder::new()
                    .schema_type(SchemaType::Type(Type::String))
                    .description(Some(doc_text(&[$($doc),*])))
                    .enum_values(Some(Self::TEXTS.iter().copied()))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

words! {
    /// A resource's derived phase.
    pub enum Phase as "phase" {
        /// Being reconciled (behind, or not yet healthy).
        Reconciling = "Reconciling",
        /// Synced, healthy, not deleting.
        Ready = "Ready",
        /// Synced but unhealthy.
        Degraded = "Degraded",
        /// The last reconcile failed.
        Failed = "Failed",
        /// Its owner no longer emits it; removed after the grace period.
        Orphaned = "Orphaned",
        /// Set aside by an operator.
        Quarantined = "Quarantined",
        /// Being torn down.
        Deleting = "Deleting",
    }
}

impl Phase {
    /// Whether nothing progresses it until someone acts: quarantined by an operator, or
    /// orphaned and waiting out its grace.
    pub fn is_set_aside(self) -> bool {
        matches!(self, Phase::Quarantined | Phase::Orphaned)
    }
}

words! {
    /// What a task does: the `task_type` of a queue row, or of a reactor delivery's claim.
    pub enum TaskType as "task type" {
        /// Bring the resource to its spec (compose, work, rollup).
        Reconcile = "reconcile",
        /// Run the teardown reaction of a resource being deleted.
        Delete = "delete",
        /// Run one requested operation.
        Operate = "operate",
        /// Deliver a lifecycle transition to a reactor (a claim on `lifecycle_outbox`, never a
        /// queue row, so never a resource's `work`).
        React = "react",
    }
}

impl TaskType {
    /// Whether a task of this type is a row of `work_queue` (every type but [`TaskType::React`]).
    pub fn is_queued(self) -> bool {
        self != TaskType::React
    }
}

words! {
    /// What fired a task.
    pub enum TaskTrigger as "task trigger" {
        /// The generation bumped (a spec edit or the first apply).
        SpecChange = "specChange",
        /// A composite's whole live subtree settled (its rollup runs).
        ChildrenSettled = "childrenSettled",
        /// A finalizer-bearing resource is being torn down.
        DeleteRequested = "deleteRequested",
        /// An operation was requested.
        Operation = "operation",
        /// A reactor binding matched a watched resource's transition.
        Reactor = "reactor",
        /// A drift tick re-pended a settled resource (no generation bump).
        Resync = "resync",
        /// An operator asked for a reconcile now.
        Manual = "manual",
    }
}

words! {
    /// A lifecycle transition a reactor binding can watch.
    pub enum Transition as "transition" {
        /// The resource was created.
        Created = "created",
        /// It reached its spec.
        Synced = "synced",
        /// Synced but unhealthy.
        Degraded = "degraded",
        /// Its reconcile failed.
        Failed = "failed",
        /// It is gone.
        Deleted = "deleted",
    }
}

words! {
    /// One stage of a task on a worker, as the broker's metrics label it.
    pub enum Stage as "stage" {
        /// A composer's compose.
        Compose = "compose",
        /// A worker's reconcile.
        Work = "work",
        /// A composite's rollup.
        Rollup = "rollup",
        /// A teardown.
        Delete = "delete",
        /// An operation.
        Operate = "operate",
        /// A reactor delivery.
        React = "react",
    }
}

words! {
    /// A day-2 operation's state.
    pub enum OperationState as "operation state" {
        /// Queued.
        Pending = "pending",
        /// A worker has it.
        Running = "running",
        /// Done.
        Succeeded = "succeeded",
        /// Failed for good.
        Failed = "failed",
    }
}

words! {
    /// What an apply did.
    pub enum ApplyResult as "apply result" {
        /// A new resource.
        Created = "created",
        /// An existing resource changed.
        Configured = "configured",
        /// Nothing changed.
        Unchanged = "unchanged",
    }
}

words! {
    /// A process's role.
    pub enum MemberRole as "role" {
        /// Control plane and broker in one process.
        All = "all",
        /// HTTP API, drainers, reaper.
        Control = "control",
        /// WorkerService only.
        Broker = "broker",
    }
}

impl MemberRole {
    /// Whether the process runs the control plane (API, drainers, reaper).
    pub fn control(self) -> bool {
        matches!(self, MemberRole::All | MemberRole::Control)
    }

    /// Whether the process runs the broker (WorkerService).
    pub fn broker(self) -> bool {
        matches!(self, MemberRole::All | MemberRole::Broker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word of `T` survives text, serde and back, and nothing else parses.
    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr + serde::Serialize,
        T: serde::de::DeserializeOwned,
    {
        let mut seen = std::collections::BTreeSet::new();
        for w in all {
            let text = w.to_string();
            assert!(seen.insert(text.clone()), "{text} is spelt twice");
            assert!(
                text.parse::<T>().ok() == Some(*w),
                "{text} does not parse back"
            );
            let json = serde_json::to_value(w).unwrap();
            assert_eq!(json, serde_json::Value::String(text.clone()));
            assert_eq!(serde_json::from_value::<T>(json).unwrap(), *w);
        }
        assert!("".parse::<T>().is_err());
        assert!(serde_json::from_value::<T>(serde_json::json!("nope")).is_err());
    }

    #[test]
    fn every_set_round_trips() {
        round_trips(Phase::ALL);
        round_trips(TaskType::ALL);
        round_trips(TaskTrigger::ALL);
        round_trips(Transition::ALL);
        round_trips(Stage::ALL);
        round_trips(OperationState::ALL);
        round_trips(ApplyResult::ALL);
        round_trips(MemberRole::ALL);
    }

    #[test]
    fn an_unknown_word_says_what_it_is_not() {
        let e = "Done".parse::<Phase>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"Done\" is not a phase (one of Reconciling, Ready, Degraded, Failed, Orphaned, \
             Quarantined, Deleting)"
        );
    }
}
