//! Reading the API: the feeds (reflectors), the indexes over the stores, error categories.

pub mod category;
pub mod client;
pub mod feed;
pub mod index;
pub mod served;
pub mod snapshot_index;
