//! A feed's failure: the watcher's error kept as the source, classified from it, and the line
//! the store's health and logs show.

use std::error::Error as _;
use std::time::Duration;

use kube::core::Status;
use kube::runtime::watcher;

use crate::watch::category::Category;
use crate::watch::feed::FeedError;

fn status(code: u16, reason: &str, message: &str) -> Box<Status> {
    Status::failure(message, reason).with_code(code).boxed()
}

#[test]
fn a_failed_list_keeps_the_watchers_error_and_says_its_innermost_cause() {
    let forbidden = "persistentvolumeclaims is forbidden: User \"x\" cannot list";
    let e = FeedError::Watch(watcher::Error::InitialListFailed(kube::Error::Api(status(
        403,
        "Forbidden",
        forbidden,
    ))));
    assert_eq!(e.category(), Category::Forbidden);
    // Not the wrapper's "failed to perform initial object list: ApiError: ...".
    assert_eq!(e.to_string(), format!("403 Forbidden: {forbidden}"));
    let source = e.source().expect("the watcher's error");
    let Some(watcher::Error::InitialListFailed(kube::Error::Api(s))) =
        source.downcast_ref::<watcher::Error>()
    else {
        panic!("not the watcher's error: {source:?}");
    };
    assert_eq!(s.code, 403);
}

#[test]
fn an_expired_watch_a_missing_resource_version_and_a_slow_page_are_classified() {
    let expired = FeedError::Watch(watcher::Error::WatchError(status(
        410,
        "Expired",
        "too old resource version",
    )));
    assert_eq!(expired.category(), Category::Expired);
    assert!(expired.source().is_some());
    let odd = FeedError::Watch(watcher::Error::NoResourceVersion);
    assert_eq!(odd.category(), Category::Other);
    assert_eq!(
        odd.to_string(),
        watcher::Error::NoResourceVersion.to_string()
    );
    let slow = FeedError::ListPage(Duration::from_secs(60));
    assert_eq!(slow.category(), Category::Timeout);
    assert_eq!(slow.to_string(), "a list page took longer than 60s");
    assert!(slow.source().is_none());
}
