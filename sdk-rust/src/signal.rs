//! A ready-made shutdown future for worker binaries: SDK entry points never install signal
//! handlers themselves (the caller owns signals and exit codes), so this is opt-in.

/// Resolves on Ctrl-C (SIGINT) or SIGTERM (what Kubernetes sends before killing a pod).
/// Pass it to [`crate::serve`] to drain in-flight work on either.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C received"),
        () = term => tracing::info!("SIGTERM received"),
    }
}
