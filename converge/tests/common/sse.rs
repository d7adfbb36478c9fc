//! Watches (`?watch=true` event streams) opened by tests, as a client opens them.

use std::time::Duration;

use futures::StreamExt;

use super::wait_for;

/// The raw chunks of an open event stream.
pub type Chunks = std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<Vec<u8>>> + Send>>;

/// Opens `url` (a `?watch=true` URL) as `token` and asserts a 200. A 503 is the API's "retry
/// later" (no horizon of the event log is known yet while another transaction on the server
/// runs, as other tests' do on a shared test cluster), so it is retried for up to 30 s, as a
/// client retries it.
pub async fn open_watch(client: &reqwest::Client, url: &str, token: &str) -> Chunks {
    let open = || async {
        let r = client
            .get(url)
            .bearer_auth(token)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        (r.status() != 503).then_some(r)
    };
    let r = wait_for(Duration::from_secs(30), "a watch opened (no 503)", open).await;
    assert_eq!(r.status(), 200, "{url}");
    Box::pin(r.bytes_stream().map(|c| c.map(|b| b.to_vec())))
}
