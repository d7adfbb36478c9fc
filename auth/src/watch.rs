//! Re-reading a file the moment it changes: its directory is watched (inotify on Linux,
//! through the `notify` crate), and a failsafe re-read runs on a timer whatever the watch
//! reports.
//!
//! The directory, not the file: an editor or `kubectl` replaces a file by writing a new one
//! and renaming it over the old (a watch on the old inode hears nothing), and a Kubernetes
//! Secret volume swaps a `..data` symlink next to the file. So every event in the directory
//! that names the file, or a `..`-prefixed entry, triggers a reload after the directory has
//! been quiet for [`SETTLE`] (a write in several chunks, a rename pair), at most
//! [`SETTLE_MAX`] after the first event. Reloads compare content, so a spurious one costs a
//! read and a hash. The failsafe covers what sends no events (NFS, some FUSE mounts, a
//! watch that could not be set up) and a symlink whose target lives elsewhere.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use notify::{EventKind, RecursiveMode, Watcher, event::AccessKind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Quiet time after a change event before the file is read.
pub const SETTLE: Duration = Duration::from_millis(50);
/// Longest a stream of change events delays the read.
pub const SETTLE_MAX: Duration = Duration::from_millis(500);

/// Reloads with `reload` (on a blocking thread: it reads files) when `path` changes and
/// every `failsafe`, until `stop`. A failure is logged once per distinct message, with `kept`
/// saying what stays in force meanwhile; a watch that cannot be set up is logged and the
/// failsafe alone keeps the file fresh.
pub async fn watch_reload<E>(
    path: &Path,
    failsafe: Duration,
    stop: CancellationToken,
    kept: &'static str,
    reload: impl Fn() -> Result<bool, E> + Clone + Send + 'static,
) where
    E: std::error::Error + Send + 'static,
{
    let changed = Arc::new(Notify::new());
    // Held for the loop's life: dropping it ends the watch.
    let _watcher = match watch_dir(path, changed.clone()) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, failsafe = ?failsafe, "cannot watch the file's directory; re-reading it on the failsafe timer only");
            None
        }
    };
    let mut last_error = String::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = changed.notified() => {
                if !settle(&changed, &stop).await {
                    return;
                }
            }
            _ = tokio::time::sleep(failsafe) => {}
        }
        match tokio::task::spawn_blocking(reload.clone()).await {
            Ok(Ok(_)) => last_error.clear(),
            Ok(Err(e)) => {
                let msg = crate::error_chain(&e);
                if msg != last_error {
                    tracing::error!(error = %msg, "{kept}");
                    last_error = msg;
                }
            }
            Err(e) => tracing::error!(error = %e, "reload task failed"),
        }
    }
}

/// Waits until no change event came for [`SETTLE`], or [`SETTLE_MAX`] passed; false if
/// `stop` fired meanwhile.
async fn settle(changed: &Notify, stop: &CancellationToken) -> bool {
    let until = tokio::time::Instant::now() + SETTLE_MAX;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(SETTLE) => return true,
            _ = tokio::time::sleep_until(until) => return true,
        }
    }
}

/// Watches `path`'s directory and wakes `changed` for each event that may concern `path`.
fn watch_dir(path: &Path, changed: Arc<Notify>) -> notify::Result<notify::RecommendedWatcher> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name: Option<OsString> = path.file_name().map(Into::into);
    let mut w = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else {
            // An overflowed or failed watch: read, to be safe.
            changed.notify_one();
            return;
        };
        // Opening and reading the file (our own reload among them) is no change.
        if let EventKind::Access(a) = event.kind
            && !matches!(a, AccessKind::Close(notify::event::AccessMode::Write))
        {
            return;
        }
        let concerns = event.paths.is_empty()
            || event.paths.iter().any(|p| {
                p.file_name().is_some_and(|f| {
                    Some(f) == name.as_deref() || f.to_string_lossy().starts_with("..")
                })
            });
        if concerns {
            changed.notify_one();
        }
    })?;
    w.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A rename over the file and a write in place are both heard, with the failsafe an
    /// hour away.
    #[tokio::test]
    async fn a_replaced_or_rewritten_file_is_reread_without_the_failsafe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.yaml");
        std::fs::write(&path, "one").unwrap();
        let reads = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(std::sync::Mutex::new(String::new()));
        let stop = CancellationToken::new();
        let task = {
            let (path, reads, seen) = (path.clone(), reads.clone(), seen.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let p = path.clone();
                watch_reload(
                    &path,
                    Duration::from_secs(3600),
                    stop,
                    "kept",
                    move || -> Result<bool, std::io::Error> {
                        reads.fetch_add(1, Ordering::SeqCst);
                        *seen.lock().unwrap() = std::fs::read_to_string(&p)?;
                        Ok(true)
                    },
                )
                .await
            })
        };
        // The watch is set up on the task's first poll; until then an event could be missed,
        // so keep writing the file until a read sees it.
        let wait = |want: &'static str, rename: bool| {
            let (path, seen) = (path.clone(), seen.clone());
            async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                loop {
                    if *seen.lock().unwrap() == want {
                        return;
                    }
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "{want:?} never read"
                    );
                    if rename {
                        let tmp = path.with_extension("tmp");
                        std::fs::write(&tmp, want).unwrap();
                        std::fs::rename(&tmp, &path).unwrap();
                    } else {
                        std::fs::write(&path, want).unwrap();
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        wait("two", true).await;
        let before = reads.load(Ordering::SeqCst);
        wait("three", false).await;
        assert!(reads.load(Ordering::SeqCst) > before);
        stop.cancel();
        task.await.unwrap();
    }
}
