//! One reflected watch that says when it can be trusted. I/O: lists and watches one kind.
//!
//! A kube-runtime watcher (paginated list, then watch, relisting after a 410 Gone) feeds a
//! reflector store. Around it, this stream:
//! - turns each object into what the store keeps (a lean form, or the object stripped of unused
//!   fields) before the store sees it;
//! - applies each event to the store, then yields it (only `Apply`, `Delete` and the end of a
//!   list; list pages are buffered by the store and swapped in at the end);
//! - on any error, drops the watcher and starts a fresh one (a full list) after a backoff with
//!   jitter that is reset only by a completed list (kube-runtime's `default_backoff` is reset by
//!   the `Init` event emitted before every list attempt, so a failing list would be retried about
//!   every second forever). The completed list is the one unambiguous sign that the store is
//!   current again: a watch that reconnects silently gives none. A 410 relists at once;
//! - bounds every list page in time (a hung list is a failure), while watches are bounded by the
//!   server's timeout and kube-runtime's idle timeout.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::Api;
use kube::Resource;
use kube::runtime::reflector::Lookup;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::{self, Event};

use crate::engine::backoff::Backoff;
use crate::watch::category::{Category, describe};

/// What a feed yields.
#[derive(Debug)]
pub(crate) enum FeedItem<K> {
    /// An object was added or changed (already in the store).
    Applied(K),
    /// An object was deleted (already gone from the store).
    Deleted(K),
    /// A list completed: the store now holds exactly what the API server listed. No `Deleted`
    /// comes for the objects that vanished while the watch was down: `gone` holds them, as the
    /// store last had them (none after the first list).
    Listed {
        /// The objects the store held before the list, by key, that the list did not return.
        gone: Vec<std::sync::Arc<K>>,
    },
    /// The API server does not serve the kind (a feed started by
    /// [`crate::watch::served::once_served`]); asked again after `check_in`.
    NotServed {
        /// When discovery is asked again.
        check_in: Duration,
    },
    /// The list or watch failed; a fresh list starts after `retry_in`.
    Failed {
        /// Why ([`FeedError::category`] classifies it).
        error: FeedError,
        /// When the next attempt starts.
        retry_in: Duration,
    },
}

/// Why a list or watch failed: the watcher's error, kept as the source, or a list page that
/// took too long.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FeedError {
    /// The watcher's error. Shown as every other client error is: its innermost cause in one
    /// line, not the layers of wrapping ([`describe`]).
    #[error("{}", watch_line(.0))]
    Watch(#[source] watcher::Error),
    /// A page of a list took longer than this; the list was abandoned.
    #[error("a list page took longer than {}s", .0.as_secs())]
    ListPage(Duration),
    /// Asking discovery whether the kind is served failed.
    #[error("discovery: {0}")]
    ServedCheck(#[source] crate::watch::category::RequestError),
}

impl FeedError {
    /// What kind of failure it is.
    pub(crate) fn category(&self) -> Category {
        match self {
            FeedError::Watch(e) => Category::of_watch(e),
            FeedError::ListPage(_) => Category::Timeout,
            FeedError::ServedCheck(e) => e.category(),
        }
    }
}

/// One line for a watcher error: the client error inside its wrapper as [`describe`] says.
fn watch_line(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => describe(e),
        other => other.to_string(),
    }
}

/// Timing of a feed.
#[derive(Clone, Copy, Debug)]
pub struct FeedTiming {
    /// First retry delay after a failure.
    pub retry_initial: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Longest retry delay when the resource type itself is missing (404 on a list: the
    /// operator's CRD is not installed). Short, so that findings come back within seconds of
    /// `kubectl apply -f crds/`; the request is tiny.
    pub not_found_max: Duration,
    /// A list page that takes longer than this is abandoned and retried.
    pub list_page: Duration,
    /// How often discovery is asked again whether a kind that is not served now is (the
    /// snapshot CRDs installed after the operator started).
    pub not_served_every: Duration,
}

impl Default for FeedTiming {
    fn default() -> Self {
        FeedTiming {
            retry_initial: Duration::from_millis(500),
            retry_max: Duration::from_secs(30),
            not_found_max: Duration::from_secs(5),
            list_page: Duration::from_secs(60),
            not_served_every: Duration::from_secs(30),
        }
    }
}

/// What a feed makes of each object the API server sends (of kind `K`) before the store sees
/// it: the `L` the store keeps.
pub(crate) type Convert<K, L> = std::sync::Arc<dyn Fn(K) -> L + Send + Sync>;

/// A [`Convert`] that keeps the object's type and strips it in place.
pub(crate) fn strip<K: 'static>(f: impl Fn(&mut K) + Send + Sync + 'static) -> Convert<K, K> {
    std::sync::Arc::new(move |mut k| {
        f(&mut k);
        k
    })
}

/// What a store can hold: anything a reflector can key.
pub trait Stored: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static {}
impl<L: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static> Stored for L {}

struct State<K: Resource<DynamicType = ()> + Clone + 'static, L: Stored> {
    api: Api<K>,
    cfg: watcher::Config,
    convert: Convert<K, L>,
    writer: Writer<L>,
    stream: Option<BoxStream<'static, watcher::Result<Event<K>>>>,
    listing: bool,
    backoff: Backoff,
    sleep: Option<Duration>,
    timing: FeedTiming,
}

/// A resilient reflected watch of `api`, feeding `writer` with what `convert` makes of each
/// object.
pub(crate) fn feed<K, L: Stored>(
    api: Api<K>,
    cfg: watcher::Config,
    convert: Convert<K, L>,
    writer: Writer<L>,
    timing: FeedTiming,
    seed: u64,
) -> impl Stream<Item = FeedItem<L>> + Send + 'static
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let state = State {
        api,
        cfg,
        convert,
        writer,
        stream: None,
        listing: false,
        backoff: Backoff::new(timing.retry_initial, timing.retry_max, seed),
        sleep: None,
        timing,
    };
    futures::stream::unfold(state, |mut st| async move {
        let item = step(&mut st).await;
        Some((item, st))
    })
}

/// Runs the feed until it has something to yield: waits out a pending retry delay, then takes
/// events from the watcher (starting one if the last was dropped) until one is worth yielding.
async fn step<K, L: Stored>(st: &mut State<K, L>) -> FeedItem<L>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    loop {
        if let Some(d) = st.sleep.take() {
            tokio::time::sleep(d).await;
        }
        let next = match next_event(st).await {
            Ok(next) => next,
            Err(hung) => return hung,
        };
        match next {
            // A watcher stream does not end; if it ever does, start over.
            None => {
                st.stream = None;
                st.listing = false;
            }
            Some(Ok(event)) => {
                if let Some(item) = apply(st, event) {
                    return item;
                }
            }
            Some(Err(e)) => return fail(st, FeedError::Watch(e)),
        }
    }
}

/// What a watcher stream yields: an event, an error, or (never, in practice) its end.
type Next<K> = Option<watcher::Result<Event<K>>>;

/// The watcher's next event, starting a watcher (a fresh list) when there is none. While a list
/// is under way each page is bounded in time: a hung list is a failure, as the store is not
/// current until the list completes. A page that takes too long is `Err`: the failure to
/// yield, the watcher already dropped.
async fn next_event<K, L: Stored>(st: &mut State<K, L>) -> Result<Next<K>, FeedItem<L>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (api, cfg) = (&st.api, &st.cfg);
    let stream = st
        .stream
        .get_or_insert_with(|| watcher::watcher(api.clone(), cfg.clone()).boxed());
    if !st.listing {
        return Ok(stream.next().await);
    }
    match tokio::time::timeout(st.timing.list_page, stream.next()).await {
        Ok(next) => Ok(next),
        Err(_) => {
            let error = FeedError::ListPage(st.timing.list_page);
            Err(fail(st, error))
        }
    }
}

/// Converts one event, applies it to the store, and says what to yield of it: nothing for the
/// start of a list and its pages (the store buffers them), the change for `Apply` and `Delete`,
/// and the objects that vanished at the end of a list.
fn apply<K, L: Stored>(st: &mut State<K, L>, event: Event<K>) -> Option<FeedItem<L>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let convert = &st.convert;
    let event = match event {
        Event::Apply(o) => Event::Apply(convert(o)),
        Event::InitApply(o) => Event::InitApply(convert(o)),
        Event::Delete(o) => Event::Delete(convert(o)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    };
    // What the store held until this list is swapped in (the writer keeps it readable until
    // then).
    let before = matches!(event, Event::InitDone).then(|| st.writer.as_reader().state());
    st.writer.apply_watcher_event(&event);
    match event {
        Event::Init => {
            st.listing = true;
            None
        }
        Event::InitApply(_) => None,
        Event::InitDone => {
            // A completed list is the one sign that the store is current again: only it
            // resets the backoff (see the module doc).
            st.listing = false;
            st.backoff.reset();
            let now = st.writer.as_reader();
            let gone = before
                .unwrap_or_default()
                .into_iter()
                .filter(|o| now.get(&o.to_object_ref(())).is_none())
                .collect();
            Some(FeedItem::Listed { gone })
        }
        Event::Apply(o) => Some(FeedItem::Applied(o)),
        Event::Delete(o) => Some(FeedItem::Deleted(o)),
    }
}

/// A failed list or watch: drops the watcher and sets the delay before the next one.
fn fail<K: Resource<DynamicType = ()> + Clone + 'static, L: Stored>(
    st: &mut State<K, L>,
    error: FeedError,
) -> FeedItem<L> {
    // Drop the watcher (and its connection); the next one lists afresh.
    st.stream = None;
    st.listing = false;
    let retry_in = match error.category() {
        // The watcher's own answer to 410 is a relist, at once.
        Category::Expired => Duration::ZERO,
        Category::NotFound => st.backoff.next_delay().min(st.timing.not_found_max),
        _ => st.backoff.next_delay(),
    };
    st.sleep = Some(retry_in);
    FeedItem::Failed { error, retry_in }
}
