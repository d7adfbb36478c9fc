//! The broker's error type and its single conversion to gRPC status.

/// Errors at the broker boundary.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A database operation failed.
    #[error("database operation failed: {op}")]
    Db {
        /// What the broker was doing.
        op: &'static str,
        /// The cause.
        #[source]
        source: sqlx::Error,
    },
    /// The client broke the stream protocol.
    #[error("{0}")]
    Protocol(String),
    /// The broker is shutting down.
    #[error("broker is shutting down")]
    ShuttingDown,
}

impl Error {
    /// Wraps a sqlx error with the operation that failed.
    pub fn db(op: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
        move |source| Error::Db { op, source }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        match e {
            Error::Protocol(m) => tonic::Status::invalid_argument(m),
            Error::ShuttingDown => tonic::Status::unavailable("broker is shutting down"),
            Error::Db { .. } => {
                tracing::error!(error = %e, cause = ?std::error::Error::source(&e), "internal error");
                tonic::Status::internal("internal error")
            }
        }
    }
}

/// Result alias for the broker.
pub type Result<T, E = Error> = std::result::Result<T, E>;
