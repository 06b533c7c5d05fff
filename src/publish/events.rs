//! Kubernetes Events on the PersistentVolume when its finding appears, changes reason or clears,
//! so `kubectl describe pv` shows them. I/O: creates and patches events.k8s.io Events (the only
//! write besides VolumeLeftovers and the Lease); best effort, bounded, never blocks the loop.
//!
//! kube-runtime's `Recorder` uses the events API with its series: a repeat of the same event
//! within its cache time is one Event whose `series.count` grows, not a new object. Events of a
//! cluster-scoped object live in the `default` namespace.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::Semaphore;

use crate::telemetry::Metrics;

pub(crate) use crate::model::finding::Change;

impl Change {
    fn event(&self) -> Event {
        let (type_, reason, note) = match self {
            Change::Found { reason, message } => (
                EventType::Warning,
                format!("Leftover{}", reason.as_str()),
                message.clone(),
            ),
            Change::ReasonChanged { from, to, message } => (
                EventType::Warning,
                format!("Leftover{}", to.as_str()),
                format!("Was {}. {message}", from.as_str()),
            ),
            Change::Cleared { reason } => (
                EventType::Normal,
                "LeftoverCleared".to_string(),
                format!(
                    "No longer reported (was {}); its VolumeLeftover was deleted.",
                    reason.as_str()
                ),
            ),
        };
        Event {
            type_,
            reason,
            // The events API caps a note at 1 KiB.
            note: Some(note.chars().take(1000).collect()),
            action: "Report".into(),
            secondary: None,
        }
    }
}

/// How long kube-runtime's `Recorder` keeps an event to count its repeats (its `CACHE_TTL`, 6
/// minutes), with a margin.
const SERIES_WINDOW: Duration = Duration::from_secs(7 * 60);

/// Events a recorder publishes before the next one takes over: its cache (which counts repeats)
/// holds at most this many, about 1.5 MiB, however many findings a first start publishes. A
/// repeat across the change is a new Event instead of a count on the old one.
const RECORDER_EVENTS: usize = 1000;

/// Events published per second at most, after a burst of [`EVENT_BURST`]: a first start that
/// publishes thousands of findings, or a storm of changes, makes a few hundred Events, not one
/// request per finding beside the writes (the VolumeLeftovers are the record; Events are a
/// courtesy to `kubectl describe pv`). The rest are dropped and counted.
pub(crate) const EVENT_RATE: f64 = 10.0;
/// The burst [`EVENT_RATE`] allows.
pub(crate) const EVENT_BURST: f64 = 100.0;

/// A token bucket of [`EVENT_BURST`] tokens refilled at [`EVENT_RATE`].
pub(crate) struct Bucket {
    tokens: f64,
    at: tokio::time::Instant,
}

impl Bucket {
    /// Full at `now`.
    pub(crate) fn new(now: tokio::time::Instant) -> Bucket {
        Bucket {
            tokens: EVENT_BURST,
            at: now,
        }
    }

    /// Takes a token at `now`, if there is one.
    pub(crate) fn take(&mut self, now: tokio::time::Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * EVENT_RATE;
        self.tokens = (self.tokens + refill).min(EVENT_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Publishes events without waiting for them.
#[derive(Clone)]
pub(crate) struct Events {
    current: Arc<std::sync::Mutex<Current>>,
    bucket: Arc<std::sync::Mutex<Bucket>>,
    client: Client,
    reporter: Reporter,
    slots: Arc<Semaphore>,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

/// The recorder in use, and what it has cached.
struct Current {
    recorder: Arc<Recorder>,
    /// Events published through it (each stays in its cache until the next publish after
    /// [`SERIES_WINDOW`]).
    published: usize,
    last: Option<tokio::time::Instant>,
}

impl Events {
    /// Events reported by `volume-leftovers` from `instance` (this replica).
    pub(crate) fn new(
        client: Client,
        instance: String,
        timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Events {
        let reporter = Reporter {
            controller: "volume-leftovers".into(),
            instance: Some(instance),
        };
        Events {
            current: Arc::new(std::sync::Mutex::new(Current {
                recorder: Arc::new(Recorder::new(client.clone(), reporter.clone())),
                published: 0,
                last: None,
            })),
            bucket: Arc::new(std::sync::Mutex::new(Bucket::new(
                tokio::time::Instant::now(),
            ))),
            client,
            reporter,
            // A few at a time; beyond that, events are dropped rather than queued without bound.
            slots: Arc::new(Semaphore::new(4)),
            timeout,
            metrics,
        }
    }

    /// Lets go of the recorder's cache once every event in it is past the series window.
    ///
    /// kube-runtime's `Recorder` keeps each event it published (a full Event, about 1.5 KiB
    /// with its map slot) to count repeats, and expires them only when it publishes the next
    /// one: after a first start that published thousands of findings, an idle operator would
    /// hold them all for good. Once nothing was published for longer than the window, the
    /// cache could only be expired whole at the next publish anyway; a fresh recorder behaves
    /// the same and holds nothing. Called on a slow tick.
    pub(crate) fn tidy(&self) {
        let mut c = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if c.published > 0 && c.last.is_some_and(|t| t.elapsed() > SERIES_WINDOW) {
            c.recorder = Arc::new(Recorder::new(self.client.clone(), self.reporter.clone()));
            c.published = 0;
            c.last = None;
        }
    }

    /// The recorder in use (tests: whether [`Events::tidy`] replaced it).
    #[cfg(test)]
    pub(crate) fn recorder(&self) -> Arc<Recorder> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .recorder
            .clone()
    }

    /// Publishes `change` about the PersistentVolume `name`/`uid`, in the background. Returns
    /// false when it was dropped: too many in flight, or over [`EVENT_RATE`].
    pub(crate) fn emit(&self, name: &str, uid: &str, change: &Change) -> bool {
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            tracing::debug!(pv = %name, "events: too many in flight; this one is dropped");
            self.metrics.event("dropped");
            return false;
        };
        let allowed = self
            .bucket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(tokio::time::Instant::now());
        if !allowed {
            tracing::debug!(pv = %name, "events: over the rate; this one is dropped");
            self.metrics.event("dropped");
            return false;
        }
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolume".into()),
            name: Some(name.to_string()),
            uid: Some(uid.to_string()),
            ..ObjectReference::default()
        };
        let recorder = {
            let mut c = self.current.lock().unwrap_or_else(|e| e.into_inner());
            if c.published >= RECORDER_EVENTS {
                c.recorder = Arc::new(Recorder::new(self.client.clone(), self.reporter.clone()));
                c.published = 0;
            }
            c.published += 1;
            c.last = Some(tokio::time::Instant::now());
            c.recorder.clone()
        };
        let (event, timeout) = (change.event(), self.timeout);
        let pv = name.to_string();
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let result = match tokio::time::timeout(timeout, recorder.publish(&event, &reference))
                .await
            {
                Ok(Ok(())) => "published",
                Ok(Err(e)) => {
                    tracing::debug!(%pv, error = %crate::watch::category::describe(&e), "event not published");
                    "failed"
                }
                Err(_) => {
                    tracing::debug!(%pv, "event not published in time");
                    "failed"
                }
            };
            metrics.event(result);
        });
        true
    }
}
