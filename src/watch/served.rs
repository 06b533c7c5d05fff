//! Whether the API server serves the snapshot kinds: one discovery request. I/O.
//!
//! The discovery request (`GET /apis/snapshot.storage.k8s.io/v1`) is allowed to every
//! authenticated identity by the default `system:discovery` role, so its answer says whether the
//! kinds exist even where a list would be refused: a 403 on a list does not say whether the
//! resource exists, and a 404 on discovery is no error, only "not installed".

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Client;

use crate::engine::backoff::Backoff;
use crate::model::snapshot::API_VERSION;
use crate::watch::category::{Category, RequestError};
use crate::watch::feed::{FeedError, FeedItem, FeedTiming};

/// The plural of VolumeSnapshotContents.
pub const CONTENTS: &str = "volumesnapshotcontents";
/// The plural of VolumeSnapshots.
pub const SNAPSHOTS: &str = "volumesnapshots";

/// Whether `snapshot.storage.k8s.io/v1` serves both VolumeSnapshotContents and VolumeSnapshots
/// (`Ok(false)`: the group version is not served, or lacks one of them). Bounded by `timeout`.
pub async fn snapshots_served(client: &Client, timeout: Duration) -> Result<bool, RequestError> {
    let asked = client.list_api_group_resources(API_VERSION);
    let failed = match tokio::time::timeout(timeout, asked).await {
        Ok(Ok(list)) => {
            let has = |r: &str| list.resources.iter().any(|x| x.name == r);
            return Ok(has(CONTENTS) && has(SNAPSHOTS));
        }
        Ok(Err(e)) => RequestError::Client(e),
        Err(_) => RequestError::Timeout(timeout),
    };
    if failed.category() == Category::NotFound {
        return Ok(false);
    }
    Err(failed)
}

/// A feed that starts once the snapshot kinds are served. Until then discovery is asked every
/// `timing.not_served_every` (or, when it fails, after a backoff), and each answer is yielded:
/// [`FeedItem::NotServed`], or [`FeedItem::Failed`] with [`FeedError::ServedCheck`]. Once served,
/// the feed `start` makes takes over for good: if the kinds go away later, its lists answer 404
/// and it retries as every feed does.
pub(crate) fn once_served<L, S>(
    client: Client,
    timing: FeedTiming,
    request_timeout: Duration,
    seed: u64,
    start: impl FnOnce() -> S + Send + 'static,
) -> impl Stream<Item = FeedItem<L>> + Send + 'static
where
    L: Send + 'static,
    S: Stream<Item = FeedItem<L>> + Send + 'static,
{
    struct Asking {
        client: Client,
        wait: Option<Duration>,
        backoff: Backoff,
    }
    let asking = Asking {
        client,
        wait: None,
        backoff: Backoff::new(timing.retry_initial, timing.retry_max, seed),
    };
    let until_served = futures::stream::unfold(asking, move |mut a| async move {
        if let Some(d) = a.wait.take() {
            tokio::time::sleep(d).await;
        }
        let item = match snapshots_served(&a.client, request_timeout).await {
            Ok(true) => return None,
            Ok(false) => {
                a.backoff.reset();
                FeedItem::NotServed {
                    check_in: timing.not_served_every,
                }
            }
            Err(e) => FeedItem::Failed {
                error: FeedError::ServedCheck(e),
                retry_in: a.backoff.next_delay(),
            },
        };
        a.wait = Some(match &item {
            FeedItem::NotServed { check_in } => *check_in,
            FeedItem::Failed { retry_in, .. } => *retry_in,
            _ => Duration::ZERO,
        });
        Some((item, a))
    });
    until_served.chain(futures::stream::once(async move { start() }).flatten())
}
