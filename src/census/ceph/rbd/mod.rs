//! A read-only census of one Ceph RBD pool (optionally one RADOS namespace of it), for the
//! opt-in storage census: which images and trash entries exist, and for the images the caller
//! asks about, their size, creation time, watchers (who has them mapped) and metadata (ceph-csi
//! writes the PV and claim that own an image there).
//!
//! **I/O: reads one Ceph pool; never writes.** It talks to the monitors (authentication, maps)
//! and to the OSDs of the pool named in [`Cluster::census`], as the user given (meant to be a
//! read-only one: `mon 'allow r' osd 'profile rbd-read-only'`). Only read calls are declared
//! at all ([`SYMBOLS`]); images are opened with `rbd_open_by_id_read_only`, which registers no
//! watch and takes no lock. No file is written: librados' log file and admin socket are turned
//! off and nothing goes to stderr; only the keyring and configuration file given are read.
//!
//! librados/librbd are loaded at run time (`dlopen("librados.so.2")`, `dlopen("librbd.so.1")`,
//! paths overridable with `VL_LIBRADOS_PATH`/`VL_LIBRBD_PATH`), on the first
//! [`Cluster::connect`]: the binary needs no Ceph library unless the census is configured, and a
//! missing one is [`RbdError::LibraryMissing`], not a failure to start.
//!
//! Every call blocks (librados waits on its own threads); run them on
//! `tokio::task::spawn_blocking`. Each wait is bounded by [`CephConfig::timeout`]
//! (`client_mount_timeout`, `rados_mon_op_timeout`, `rados_osd_op_timeout`); a census stops at
//! a timeout of the listing, or at [`DETAIL_TIMEOUTS`] timeouts in a row reading details, and
//! returns [`RbdError::Unavailable`]: a census that did not finish says nothing about which
//! images exist (the caller answers Unknown, never "image missing"). A single image whose header
//! does not answer (an OSD holding its requests: one placement group not serving) costs one
//! timeout and is [`Detail::Failed`]; the listing, and every other image, still count.

mod decode;
mod ffi;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use crate::census::ceph::handle::{
    CSI_SNAPSHOT_PREFIX, CSI_VOLUME_PREFIX, HandleError, META_CLUSTER_NAME, META_PV_NAME,
    META_PVC_NAME, META_PVC_NAMESPACE, VolumeHandle, csi_volume_uuid, image_uuid, is_uuid,
    parse_volume_handle,
};
pub use decode::Category;
pub use ffi::{DEFAULT_LIBRADOS, DEFAULT_LIBRBD, READ_ONLY, SYMBOLS};

use decode::errno;
use ffi::Api;

/// How to reach the cluster.
#[derive(Clone, PartialEq, Eq)]
pub struct CephConfig {
    /// Monitor addresses as Ceph writes them (`[v2:10.0.0.1:3300,v1:10.0.0.1:6789]`, or
    /// `10.0.0.1:6789,10.0.0.2:6789`). May be empty when `conf_file` names them.
    pub mon_host: String,
    /// The user's id without `client.` (e.g. `leftovers`); `client.leftovers` is accepted too.
    pub user: String,
    /// A keyring file holding the user's key.
    pub keyring: Option<PathBuf>,
    /// The user's secret key (base64, as `ceph auth get-key` prints it); wins over `keyring`.
    pub key: Option<String>,
    /// A `ceph.conf` to read first; the options here override it.
    pub conf_file: Option<PathBuf>,
    /// The bound of every wait: connecting, each monitor and each OSD request. Whole seconds
    /// (Ceph's options are integers); rounded up, at least 1 s.
    pub timeout: Duration,
}

impl fmt::Debug for CephConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CephConfig")
            .field("mon_host", &self.mon_host)
            .field("user", &self.user)
            .field("keyring", &self.keyring)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("conf_file", &self.conf_file)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl CephConfig {
    /// The user's full name (`client.<id>`).
    pub(crate) fn client_name(&self) -> String {
        let id = self.user.strip_prefix("client.").unwrap_or(&self.user);
        format!("client.{id}")
    }
}

/// Where a failed call was aimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// The cluster: connecting, authenticating.
    Cluster {
        /// Monitor addresses (or the configuration file that names them).
        monitors: String,
        /// `client.<id>`.
        user: String,
    },
    /// A pool, and a namespace of it.
    Pool {
        pool: String,
        namespace: Option<String>,
    },
    /// One image of a pool.
    Image {
        pool: String,
        namespace: Option<String>,
        name: String,
        id: String,
    },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = |pool: &str, ns: &Option<String>| match ns {
            Some(ns) => format!("{pool}/{ns}"),
            None => pool.to_string(),
        };
        match self {
            Target::Cluster { monitors, user } => write!(f, "monitors {monitors} as {user}"),
            Target::Pool { pool, namespace } => write!(f, "pool {}", spec(pool, namespace)),
            Target::Image {
                pool,
                namespace,
                name,
                id,
            } => write!(f, "image {}/{name} (id {id})", spec(pool, namespace)),
        }
    }
}

/// One failed library call: which, on what, its code, and how long it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The librados/librbd function.
    pub call: &'static str,
    /// What it was called on.
    pub(crate) target: Target,
    /// The negative errno it returned (`-110` for a timeout).
    pub code: i32,
    /// How long the call took.
    pub(crate) elapsed: Duration,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {}: {} ({})",
            self.call,
            self.target,
            decode::strerror(self.code),
            self.code,
        )?;
        if self.elapsed >= Duration::from_millis(100) {
            write!(f, " after {:.1} s", self.elapsed.as_secs_f64())?;
        }
        Ok(())
    }
}

/// Everything that can go wrong, by [`Category`]; `Display` is one line with the call and the
/// pool (or monitors) it concerned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RbdError {
    /// A timeout (-110) or no connection: nothing is known about the pool.
    #[error(
        "Ceph is unavailable: {0}; the census is incomplete, nothing is known about the images"
    )]
    Unavailable(Box<Failure>),
    /// -EPERM/-EACCES: the user lacks a cap, or its key was refused.
    #[error("Ceph refused the request: {0} ({hint})", hint = forbidden_hint(.0))]
    Forbidden(Box<Failure>),
    /// -ENOENT for the pool or namespace.
    #[error("not found: {0}")]
    NotFound(Box<Failure>),
    /// librados/librbd could not be loaded: `library` as asked, `message` from `dlerror()`.
    #[error(
        "the Ceph client library {library} cannot be loaded: {message} (install librbd1 and librados2, or leave the Ceph census off)"
    )]
    LibraryMissing { library: String, message: String },
    /// The configuration is unusable; says what.
    #[error("the Ceph client configuration is unusable: {0}")]
    Config(String),
    /// Another code: see the [`Failure`].
    #[error("Ceph call failed: {0}")]
    Other(Box<Failure>),
}

impl RbdError {
    /// The stable category.
    pub fn category(&self) -> Category {
        match self {
            RbdError::Unavailable(_) => Category::Unavailable,
            RbdError::Forbidden(_) => Category::Forbidden,
            RbdError::NotFound(_) => Category::NotFound,
            RbdError::LibraryMissing { .. } => Category::LibraryMissing,
            RbdError::Config(_) => Category::Config,
            RbdError::Other(_) => Category::Other,
        }
    }

    /// The failed call, when a call failed.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            RbdError::Unavailable(f)
            | RbdError::Forbidden(f)
            | RbdError::NotFound(f)
            | RbdError::Other(f) => Some(f),
            RbdError::LibraryMissing { .. } | RbdError::Config(_) => None,
        }
    }

    /// Whether the census must stop here (the rest would fail the same way, or take another
    /// timeout each): Unavailable, Forbidden.
    pub(crate) fn aborts_census(&self) -> bool {
        matches!(self, RbdError::Unavailable(_) | RbdError::Forbidden(_))
    }

    fn from_failure(failure: Failure) -> RbdError {
        let failure = Box::new(failure);
        match decode::categorize(failure.call, failure.code) {
            Category::Unavailable => RbdError::Unavailable(failure),
            Category::Forbidden => RbdError::Forbidden(failure),
            Category::NotFound => RbdError::NotFound(failure),
            Category::Config => RbdError::Config(failure.to_string()),
            Category::LibraryMissing | Category::Other => RbdError::Other(failure),
        }
    }
}

fn forbidden_hint(f: &Failure) -> &'static str {
    if f.call == "rados_connect" {
        "the user's key was refused: check the user name and its key"
    } else {
        "check the user's caps: mon 'allow r' osd 'profile rbd-read-only'"
    }
}

/// The version of the librbd that is (or would be) loaded, e.g. `1.16.0`; loads the libraries.
pub fn library_version() -> Result<String, RbdError> {
    let api = load()?;
    let (mut major, mut minor, mut extra) = (0, 0, 0);
    // SAFETY: three valid out-pointers.
    unsafe { (api.rbd_version)(&mut major, &mut minor, &mut extra) };
    Ok(format!("{major}.{minor}.{extra}"))
}

fn load() -> Result<&'static Api, RbdError> {
    ffi::load().map_err(|e| RbdError::LibraryMissing {
        library: e.library,
        message: e.message,
    })
}

/// An image's name and id, as listed (`rbd_list2`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageName {
    pub name: String,
    pub id: String,
}

/// A client that has a watch on an image (`rbd status`): a mapping, a VM, `rbd watch`, ...
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watcher {
    /// The client's address (`127.0.0.1:0/1234567`).
    pub address: String,
    /// The client's global id (the `N` of `client.N`).
    pub id: i64,
    /// The watch's cookie.
    pub(crate) cookie: u64,
}

/// What an opened image says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageDetail {
    /// Provisioned size in bytes.
    pub size: u64,
    /// When it was created (`None` for images older than Mimic, which have no such field).
    pub created: Option<jiff::Timestamp>,
    /// Clients that have it open read-write or mapped (a read-only open, like this census's,
    /// is not listed).
    pub watchers: Vec<Watcher>,
    /// Every metadata key and value (`rbd image-meta list`).
    pub metadata: BTreeMap<String, String>,
}

/// The claim and volume ceph-csi recorded on an image it provisioned.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CsiOwner {
    pub pv_name: Option<String>,
    pub pvc_name: Option<String>,
    pub pvc_namespace: Option<String>,
    pub cluster_name: Option<String>,
}

impl ImageDetail {
    /// ceph-csi's keys (`csi.storage.k8s.io/pv/name`, `.../pvc/name`, `.../pvc/namespace`,
    /// `csi.ceph.com/cluster/name`); `None` when none of them is set.
    pub fn csi_owner(&self) -> Option<CsiOwner> {
        let get = |k: &str| self.metadata.get(k).cloned();
        let owner = CsiOwner {
            pv_name: get(META_PV_NAME),
            pvc_name: get(META_PVC_NAME),
            pvc_namespace: get(META_PVC_NAMESPACE),
            cluster_name: get(META_CLUSTER_NAME),
        };
        (owner != CsiOwner::default()).then_some(owner)
    }
}

/// What the census is to read of one listed image, beyond its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Nothing.
    Name,
    /// Its provisioned size only: one request (`rbd.get_size` on its header object), for an
    /// image a volume names, whose size is compared with the volume's capacity.
    Size,
    /// Everything in [`ImageDetail`]: an open and four reads, for an image nothing names.
    Detail,
}

/// What the census learned of one image beyond its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The caller did not ask ([`Ask::Name`]), or the image has no id to read it by (an image
    /// of the old format 1).
    NotAsked,
    /// Its provisioned size in bytes ([`Ask::Size`]).
    Size(u64),
    /// Read.
    Read(ImageDetail),
    /// Removed between the listing and the open (-ENOENT).
    Gone,
    /// Reading it failed (a timeout, or another error; a refusal ends the census, and so do
    /// [`DETAIL_TIMEOUTS`] timeouts in a row).
    Failed(RbdError),
}

/// Timeouts in a row reading image details after which Ceph is taken to be unavailable (the
/// census ends with the last one); fewer are images whose requests are held, and the census
/// goes on without their details.
pub const DETAIL_TIMEOUTS: usize = 3;

/// One image of the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub name: ImageName,
    pub detail: Detail,
}

/// Why an image is in the trash (`rbd_trash_image_source_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrashSource {
    /// `rbd trash mv` (also ceph-csi's deletion of an image with snapshots/clones).
    User,
    Mirroring,
    Migration,
    /// Being removed (`rbd rm` in progress).
    Removing,
    /// A parent moved to the trash because its last clone is being removed.
    UserParent,
    Unknown(i32),
}

impl TrashSource {
    fn from_c(v: c_int) -> TrashSource {
        match v {
            0 => TrashSource::User,
            1 => TrashSource::Mirroring,
            2 => TrashSource::Migration,
            3 => TrashSource::Removing,
            4 => TrashSource::UserParent,
            other => TrashSource::Unknown(other),
        }
    }
}

/// An image in the pool's trash (`rbd trash ls`): still holds its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrashEntry {
    pub id: String,
    /// The name it had.
    pub name: String,
    pub source: TrashSource,
    /// When it was moved to the trash.
    pub deleted: Option<jiff::Timestamp>,
    /// Until when it may not be purged.
    pub(crate) deferment_end: Option<jiff::Timestamp>,
}

/// Library calls made by one census, by function. The ones that reach the cluster are marked;
/// an open by id is several OSD reads inside librbd (the header's fields, the object map and
/// snapshot context, the parent), counted here as one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    /// `rbd_namespace_exists` (OSD).
    pub namespace_exists: u64,
    /// `rbd_list2` (OSD; repeated when the list grew past the buffer).
    pub list: u64,
    /// `rbd_trash_list` (OSD; likewise).
    pub trash_list: u64,
    /// `rbd_open_by_id_read_only` (OSD, several reads).
    pub open: u64,
    /// `rbd_stat` (local: read at the open).
    pub(crate) stat: u64,
    /// `rbd_get_create_timestamp` (local).
    pub(crate) create_timestamp: u64,
    /// `rbd_watchers_list` (OSD).
    pub watchers_list: u64,
    /// `rbd_metadata_list` (OSD; repeated when a buffer was short).
    pub metadata_list: u64,
    /// `rbd_close` (local for a read-only open).
    pub close: u64,
    /// `rados_exec` of `rbd.get_size` (OSD: one read of the header).
    pub get_size: u64,
}

impl Requests {
    /// Every library call.
    pub fn total(&self) -> u64 {
        self.namespace_exists
            + self.list
            + self.trash_list
            + self.open
            + self.stat
            + self.create_timestamp
            + self.watchers_list
            + self.metadata_list
            + self.close
            + self.get_size
    }

    /// The calls that send requests to the cluster.
    pub fn to_cluster(&self) -> u64 {
        self.namespace_exists
            + self.list
            + self.trash_list
            + self.open
            + self.watchers_list
            + self.metadata_list
            + self.get_size
    }
}

/// How long each part of a census took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// Pool lookup, namespace check, `rbd_list2`.
    pub list: Duration,
    /// `rbd_trash_list`.
    pub trash: Duration,
    /// Reading the images asked about (their details, or their sizes).
    pub detail: Duration,
    /// The whole census.
    pub total: Duration,
}

/// The census of one pool (one namespace of it): complete, or an error instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolCensus {
    /// The cluster's fsid (ceph-csi's usual `clusterID`).
    pub fsid: String,
    pub pool: String,
    /// The pool's id (the one ceph-csi encodes in its volume handles).
    pub pool_id: i64,
    /// The namespace (`None`: the pool's default namespace).
    pub namespace: Option<String>,
    /// Every image, sorted by name.
    pub images: Vec<Image>,
    /// Every trash entry, by name (as librbd lists them: entries `rbd rm` is removing right
    /// now are left out).
    pub trash: Vec<TrashEntry>,
    pub requests: Requests,
    pub timings: Timings,
}

impl PoolCensus {
    /// The image of that name.
    pub fn image(&self, name: &str) -> Option<&Image> {
        self.images.iter().find(|i| i.name.name == name)
    }
}

/// A connection to one cluster as one user. Blocking; `Send` and `Sync` (librados handles are
/// thread-safe); disconnects on drop.
pub struct Cluster {
    api: &'static Api,
    handle: ffi::rados_t,
    fsid: String,
    timeout: Duration,
    /// How many images and trash entries the last census found: the next one sizes its
    /// buffers from that, as a short buffer costs a second full listing.
    last_counts: (AtomicUsize, AtomicUsize),
}

// SAFETY: a rados_t may be used from any thread, also concurrently (librados locks inside).
unsafe impl Send for Cluster {}
// SAFETY: as above.
unsafe impl Sync for Cluster {}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("fsid", &self.fsid)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SAFETY: the handle came from rados_create2 and is shut down once.
        unsafe { (self.api.rados_shutdown)(self.handle) }
    }
}

fn cstring(what: &str, s: &str) -> Result<CString, RbdError> {
    CString::new(s).map_err(|_| RbdError::Config(format!("{what} contains a NUL byte")))
}

/// Owned copy of a C string from librbd; empty for NULL.
///
/// # Safety
/// `p` is NULL or a valid NUL-terminated string.
unsafe fn from_c(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: per the contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn timestamp(secs: i64, nanos: i64) -> Option<jiff::Timestamp> {
    if secs == 0 && nanos == 0 {
        return None;
    }
    jiff::Timestamp::new(secs, i32::try_from(nanos).ok()?).ok()
}

/// Grows a buffer for a call that reports -ERANGE and the size it needs: at most this many
/// tries (the listing may grow between two calls).
const RANGE_TRIES: usize = 8;

/// Room for `last` entries and some growth, at least `floor`.
fn buffer_size(floor: usize, last: usize) -> usize {
    last.saturating_add(last / 8 + 64).max(floor)
}

/// What a failed connect names: the monitors (or the configuration file that names them) and
/// the user. Refuses a configuration with no user, or no way to find the monitors.
fn cluster_target(config: &CephConfig) -> Result<Target, RbdError> {
    let user = config.client_name();
    if user == "client." {
        return Err(RbdError::Config("no user given".into()));
    }
    if config.mon_host.is_empty() && config.conf_file.is_none() {
        return Err(RbdError::Config(
            "no monitor address (mon_host) and no configuration file".into(),
        ));
    }
    let monitors = if config.mon_host.is_empty() {
        config
            .conf_file
            .as_ref()
            .map(|p| format!("of {}", p.display()))
            .unwrap_or_default()
    } else {
        config.mon_host.clone()
    };
    Ok(Target::Cluster { monitors, user })
}

/// The keyring file given, as librados takes it.
fn keyring_path(config: &CephConfig) -> Option<String> {
    config
        .keyring
        .as_ref()
        .map(|k| k.to_string_lossy().into_owned())
}

/// A keyring that will be used (no key given) must be readable: checked here because librados
/// says only "Permission denied" for a keyring it cannot read.
fn keyring_readable(config: &CephConfig) -> Result<(), RbdError> {
    if config.key.is_none()
        && let Some(path) = &config.keyring
        && let Err(e) = std::fs::File::open(path)
    {
        return Err(RbdError::Config(format!("keyring {}: {e}", path.display())));
    }
    Ok(())
}

/// The librados options for `config`, in the order they are set: how to reach the monitors,
/// which key to use, the bounds of every wait, and no files or output of librados's own.
fn options(config: &CephConfig) -> Vec<(&'static str, String)> {
    let mut options: Vec<(&'static str, String)> = Vec::new();
    if !config.mon_host.is_empty() {
        options.push(("mon_host", config.mon_host.clone()));
    }
    match (keyring_path(config), &config.key) {
        (Some(k), _) => options.push(("keyring", k)),
        // A key and no keyring: do not look in /etc/ceph for one.
        (None, Some(_)) => options.push(("keyring", String::new())),
        (None, None) => {}
    }
    if let Some(key) = &config.key {
        options.push(("key", key.clone()));
    }
    let secs = decode::timeout_secs(config.timeout).to_string();
    options.extend(
        [
            // 0 (the defaults of the last two) means "wait forever".
            ("client_mount_timeout", secs.as_str()),
            ("rados_mon_op_timeout", secs.as_str()),
            ("rados_osd_op_timeout", secs.as_str()),
            // No files, no noise: the caller logs the errors it gets back.
            ("log_file", ""),
            ("admin_socket", ""),
            ("log_to_stderr", "false"),
            ("err_to_stderr", "false"),
        ]
        .map(|(option, value)| (option, value.to_string())),
    );
    options
}

impl Cluster {
    /// Loads the libraries (first time only), connects and authenticates. Fails with
    /// [`RbdError::Unavailable`] within about `timeout` when no monitor answers.
    pub fn connect(config: &CephConfig) -> Result<Cluster, RbdError> {
        let api = load()?;
        let target = cluster_target(config)?;
        // From here on the handle is the Cluster's: any failure below drops it, and the drop
        // shuts the handle down.
        let mut cluster = Cluster::create(api, config, &target)?;
        if let Some(conf) = &config.conf_file {
            cluster.read_conf_file(conf)?;
        }
        keyring_readable(config)?;
        cluster.set_options(&options(config))?;
        cluster.connect_to_monitors(config, &target)?;
        cluster.fsid = cluster.read_fsid();
        Ok(cluster)
    }

    /// `rados_create2`: a handle for `config`'s user, not yet configured or connected.
    fn create(
        api: &'static Api,
        config: &CephConfig,
        target: &Target,
    ) -> Result<Cluster, RbdError> {
        let cluster_name = cstring("cluster", "ceph")?;
        let name = cstring("user", &config.client_name())?;
        let mut handle: ffi::rados_t = ptr::null_mut();
        let t = Instant::now();
        // SAFETY: valid out-pointer and C strings.
        let r =
            unsafe { (api.rados_create2)(&mut handle, cluster_name.as_ptr(), name.as_ptr(), 0) };
        if r < 0 || handle.is_null() {
            // No handle, so no Cluster: nothing to shut down.
            return Err(RbdError::from_failure(Failure {
                call: "rados_create2",
                target: target.clone(),
                code: r.min(-errno::EINVAL),
                elapsed: t.elapsed(),
            }));
        }
        Ok(Cluster {
            api,
            handle,
            fsid: String::new(),
            timeout: config.timeout,
            last_counts: Default::default(),
        })
    }

    /// `rados_conf_read_file`: the `ceph.conf` given, read before the options, which override it.
    fn read_conf_file(&self, conf: &Path) -> Result<(), RbdError> {
        let path = cstring("conf_file", &conf.to_string_lossy())?;
        // SAFETY: valid handle and C string.
        let r = unsafe { (self.api.rados_conf_read_file)(self.handle, path.as_ptr()) };
        if r < 0 {
            return Err(RbdError::Config(format!(
                "reading {}: {} ({r})",
                conf.display(),
                decode::strerror(r)
            )));
        }
        Ok(())
    }

    /// `rados_conf_set` for each option, in order; stops at the first refused.
    fn set_options(&self, options: &[(&str, String)]) -> Result<(), RbdError> {
        for (option, value) in options {
            let (option, value) = (*option, value.as_str());
            let (o, v) = (cstring(option, option)?, cstring(option, value)?);
            // SAFETY: valid handle and C strings.
            let r = unsafe { (self.api.rados_conf_set)(self.handle, o.as_ptr(), v.as_ptr()) };
            if r < 0 {
                // The error is logged by the caller: the secret key must not be in it.
                let shown = if option == "key" { "<redacted>" } else { value };
                return Err(RbdError::Config(format!(
                    "setting {option} = {shown:?}: {} ({r})",
                    decode::strerror(r)
                )));
            }
        }
        Ok(())
    }

    /// `rados_connect`: reaches the monitors and authenticates, within `client_mount_timeout`.
    fn connect_to_monitors(&self, config: &CephConfig, target: &Target) -> Result<(), RbdError> {
        let t = Instant::now();
        // SAFETY: valid, configured handle.
        let r = unsafe { (self.api.rados_connect)(self.handle) };
        if r < 0 {
            return Err(match self.failure("rados_connect", target, r, t) {
                // ENOENT from connect: no key found (the keyring is missing or unreadable).
                RbdError::Config(_) => RbdError::Config(format!(
                    "no key for {}: keyring {} not readable and no key given ({r})",
                    config.client_name(),
                    keyring_path(config).as_deref().unwrap_or("(default paths)")
                )),
                e => e,
            });
        }
        Ok(())
    }

    /// `rados_cluster_fsid` of a connected handle; empty if librados cannot say (the fsid only
    /// labels the census, so that is no reason to fail).
    fn read_fsid(&self) -> String {
        let mut buf = [0u8; 64];
        // SAFETY: valid handle; buffer and its length.
        let r = unsafe {
            (self.api.rados_cluster_fsid)(self.handle, buf.as_mut_ptr().cast(), buf.len())
        };
        if r < 0 {
            String::new()
        } else {
            decode::c_buffer_str(&buf)
        }
    }

    /// The cluster's fsid.
    pub fn fsid(&self) -> &str {
        &self.fsid
    }

    /// Lists the images (`rbd_list2`) and the trash (`rbd_trash_list`) of `pool` (of its
    /// `namespace`, which must exist), and reads of each image what `ask` says (its details
    /// opened read-only by id, or its size alone). Stops at the first timeout of the listing,
    /// at a refusal, or at [`DETAIL_TIMEOUTS`] timeouts in a row reading images. Blocking.
    pub fn census(
        &self,
        pool: &str,
        namespace: Option<&str>,
        ask: impl Fn(&ImageName) -> Ask,
    ) -> Result<PoolCensus, RbdError> {
        let started = Instant::now();
        let namespace = namespace.filter(|n| !n.is_empty());
        let pool_target = Target::Pool {
            pool: pool.to_string(),
            namespace: namespace.map(str::to_string),
        };
        let mut requests = Requests::default();
        let c_pool = cstring("pool", pool)?;
        let pool_id = self.pool_id(&c_pool, &pool_target)?;
        let io = self.ioctx(&c_pool, &pool_target)?;
        if let Some(ns) = namespace {
            io.enter_namespace(ns, &pool_target, &mut requests)?;
        }
        let mut names = io.list(&pool_target, &mut requests)?;
        names.sort();
        let list_done = started.elapsed();

        let t = Instant::now();
        let mut trash = io.trash(&pool_target, &mut requests)?;
        trash.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        let trash_took = t.elapsed();

        let t = Instant::now();
        let image_target = |name: &ImageName| Target::Image {
            pool: pool.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.name.clone(),
            id: name.id.clone(),
        };
        let images = io.read_details(names, image_target, ask, &mut requests)?;
        let detail_took = t.elapsed();
        Ok(PoolCensus {
            fsid: self.fsid.clone(),
            pool: pool.to_string(),
            pool_id,
            namespace: namespace.map(str::to_string),
            images,
            trash,
            requests,
            timings: Timings {
                list: list_done,
                trash: trash_took,
                detail: detail_took,
                total: started.elapsed(),
            },
        })
    }

    /// `rados_pool_lookup`: the pool's id (the one ceph-csi encodes in its volume handles).
    fn pool_id(&self, pool: &CStr, target: &Target) -> Result<i64, RbdError> {
        let t = Instant::now();
        // SAFETY: valid handle and C string.
        let pool_id = unsafe { (self.api.rados_pool_lookup)(self.handle, pool.as_ptr()) };
        if pool_id < 0 {
            return Err(self.failure(
                "rados_pool_lookup",
                target,
                i32::try_from(pool_id).unwrap_or(-errno::EIO),
                t,
            ));
        }
        Ok(pool_id)
    }

    fn failure(&self, call: &'static str, target: &Target, code: c_int, t: Instant) -> RbdError {
        RbdError::from_failure(Failure {
            call,
            target: target.clone(),
            code,
            elapsed: t.elapsed(),
        })
    }

    fn ioctx(&self, pool: &CStr, target: &Target) -> Result<IoCtx<'_>, RbdError> {
        let mut io: ffi::rados_ioctx_t = ptr::null_mut();
        let t = Instant::now();
        // SAFETY: valid handle, C string, out-pointer.
        let r = unsafe { (self.api.rados_ioctx_create)(self.handle, pool.as_ptr(), &mut io) };
        if r < 0 || io.is_null() {
            return Err(self.failure("rados_ioctx_create", target, r.min(-errno::EIO), t));
        }
        Ok(IoCtx { cluster: self, io })
    }
}

/// What reading one image's detail (or size) comes to, `timeouts` being the timeouts in a row so
/// far, this one included; an error ends the census. A timeout costs that image its detail until
/// there are [`DETAIL_TIMEOUTS`] in a row (one placement group not serving holds only the
/// images in it; that many in a row is Ceph not answering). A refusal ends it at once (every
/// other image would be refused too); an image removed since the listing is [`Detail::Gone`].
fn detail_of(read: Result<Detail, RbdError>, timeouts: usize) -> Result<Detail, RbdError> {
    Ok(match read {
        Ok(d) => d,
        Err(e @ RbdError::Unavailable(_)) if timeouts < DETAIL_TIMEOUTS => Detail::Failed(e),
        Err(e) if e.aborts_census() => return Err(e),
        Err(RbdError::Other(f)) if f.code == -errno::ENOENT => Detail::Gone,
        Err(e) => Detail::Failed(e),
    })
}

/// An I/O context on one pool (and namespace); destroyed on drop.
struct IoCtx<'a> {
    cluster: &'a Cluster,
    io: ffi::rados_ioctx_t,
}

impl Drop for IoCtx<'_> {
    fn drop(&mut self) {
        // SAFETY: created by rados_ioctx_create, destroyed once, before its cluster.
        unsafe { (self.cluster.api.rados_ioctx_destroy)(self.io) }
    }
}

/// An image opened read-only; closed on drop.
struct OpenImage<'a> {
    api: &'static Api,
    image: ffi::rbd_image_t,
    requests: &'a mut Requests,
}

impl Drop for OpenImage<'_> {
    fn drop(&mut self) {
        self.requests.close += 1;
        // SAFETY: opened by rbd_open_by_id_read_only, closed once.
        unsafe { (self.api.rbd_close)(self.image) };
    }
}

impl IoCtx<'_> {
    fn api(&self) -> &'static Api {
        self.cluster.api
    }

    /// Moves this context into namespace `ns` of its pool, after checking that it exists
    /// (`rbd_namespace_exists`): a mistyped namespace must be [`RbdError::NotFound`], never a
    /// listing that could read as a pool whose images are all missing.
    fn enter_namespace(
        &self,
        ns: &str,
        target: &Target,
        requests: &mut Requests,
    ) -> Result<(), RbdError> {
        let c_ns = cstring("namespace", ns)?;
        let mut exists = false;
        let t = Instant::now();
        requests.namespace_exists += 1;
        // SAFETY: valid ioctx (default namespace), C string, out-pointer.
        let r = unsafe { (self.api().rbd_namespace_exists)(self.io, c_ns.as_ptr(), &mut exists) };
        if r < 0 {
            return Err(self.cluster.failure("rbd_namespace_exists", target, r, t));
        }
        if !exists {
            return Err(RbdError::NotFound(Box::new(Failure {
                call: "rbd_namespace_exists",
                target: target.clone(),
                code: -errno::ENOENT,
                elapsed: t.elapsed(),
            })));
        }
        // SAFETY: valid ioctx and C string (copied by librados).
        unsafe { (self.api().rados_ioctx_set_namespace)(self.io, c_ns.as_ptr()) };
        Ok(())
    }

    /// Every listed image, with what `ask` says of each read, in the order listed. Ends the
    /// census at a refusal, or at [`DETAIL_TIMEOUTS`] timeouts in a row (see [`detail_of`]).
    fn read_details(
        &self,
        names: Vec<ImageName>,
        target: impl Fn(&ImageName) -> Target,
        ask: impl Fn(&ImageName) -> Ask,
        requests: &mut Requests,
    ) -> Result<Vec<Image>, RbdError> {
        let mut images = Vec::with_capacity(names.len());
        // Only the images read count: one not asked about neither adds to nor ends a run.
        let mut timeouts = 0;
        for name in names {
            let read = match ask(&name) {
                // A format 1 image has no id (and no header object by it).
                Ask::Name => None,
                Ask::Size if name.id.is_empty() => None,
                Ask::Size => Some(
                    self.header_size(&name.id, &target(&name), requests)
                        .map(Detail::Size),
                ),
                Ask::Detail => Some(
                    self.inspect(&name.id, &target(&name), requests)
                        .map(Detail::Read),
                ),
            };
            let detail = match read {
                Some(read) => {
                    timeouts = match &read {
                        Err(RbdError::Unavailable(_)) => timeouts + 1,
                        _ => 0,
                    };
                    detail_of(read, timeouts)?
                }
                None => Detail::NotAsked,
            };
            images.push(Image { name, detail });
        }
        Ok(images)
    }

    /// The image's provisioned size, read from its header object (`rbd_header.<id>`) by the
    /// `rbd` object class's `get_size` (for the head, not a snapshot): one OSD request, where an
    /// open is several. The class and method are constants: this is the only `rados_exec`.
    fn header_size(
        &self,
        id: &str,
        target: &Target,
        requests: &mut Requests,
    ) -> Result<u64, RbdError> {
        let oid = cstring("image id", &format!("rbd_header.{id}"))?;
        let input = decode::CEPH_NOSNAP.to_le_bytes();
        let mut out = [0u8; 32];
        let t = Instant::now();
        requests.get_size += 1;
        // SAFETY: valid ioctx, C strings, an input buffer and an output buffer with their lengths.
        let r = unsafe {
            (self.api().rados_exec)(
                self.io,
                oid.as_ptr(),
                c"rbd".as_ptr(),
                c"get_size".as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        };
        if r < 0 {
            return Err(self.cluster.failure("rbd.get_size", target, r, t));
        }
        let len = usize::try_from(r).unwrap_or(0).min(out.len());
        decode::get_size_reply(&out[..len]).ok_or_else(|| {
            RbdError::Other(Box::new(Failure {
                call: "rbd.get_size",
                target: target.clone(),
                code: -errno::EBADMSG,
                elapsed: t.elapsed(),
            }))
        })
    }

    fn list(&self, target: &Target, requests: &mut Requests) -> Result<Vec<ImageName>, RbdError> {
        let api = self.api();
        let last = &self.cluster.last_counts.0;
        let mut cap = buffer_size(4096, last.load(Ordering::Relaxed));
        for _ in 0..RANGE_TRIES {
            let mut buf: Vec<ffi::rbd_image_spec_t> = Vec::with_capacity(cap);
            let mut n = cap;
            let t = Instant::now();
            requests.list += 1;
            // SAFETY: the buffer has room for `cap` specs, and `n` says so.
            let r = unsafe { (api.rbd_list2)(self.io, buf.as_mut_ptr(), &mut n) };
            if r == -errno::ERANGE {
                cap = n.max(cap).saturating_add(cap / 4 + 16);
                continue;
            }
            if r < 0 {
                return Err(self.cluster.failure("rbd_list2", target, r, t));
            }
            if n > cap {
                return Err(self.cluster.failure("rbd_list2", target, -errno::ERANGE, t));
            }
            // SAFETY: librbd filled the first `n` specs.
            unsafe { buf.set_len(n) };
            let names = buf
                .iter()
                .map(|s| ImageName {
                    // SAFETY: strings owned by librbd until the cleanup below.
                    name: unsafe { from_c(s.name) },
                    id: unsafe { from_c(s.id) },
                })
                .collect();
            // SAFETY: the `n` specs librbd filled, cleaned up once.
            unsafe { (api.rbd_image_spec_list_cleanup)(buf.as_mut_ptr(), n) };
            last.store(n, Ordering::Relaxed);
            return Ok(names);
        }
        Err(self
            .cluster
            .failure("rbd_list2", target, -errno::ERANGE, Instant::now()))
    }

    fn trash(&self, target: &Target, requests: &mut Requests) -> Result<Vec<TrashEntry>, RbdError> {
        let api = self.api();
        let last = &self.cluster.last_counts.1;
        let mut cap = buffer_size(1024, last.load(Ordering::Relaxed));
        for _ in 0..RANGE_TRIES {
            let mut buf: Vec<ffi::rbd_trash_image_info_t> = Vec::with_capacity(cap);
            let mut n = cap;
            let t = Instant::now();
            requests.trash_list += 1;
            // SAFETY: room for `cap` entries, and `n` says so.
            let r = unsafe { (api.rbd_trash_list)(self.io, buf.as_mut_ptr(), &mut n) };
            if r == -errno::ERANGE {
                cap = n.max(cap).saturating_add(cap / 4 + 16);
                continue;
            }
            if r < 0 {
                return Err(self.cluster.failure("rbd_trash_list", target, r, t));
            }
            // rbd_trash_list returns the number of entries and also stores it in `n`.
            if n > cap {
                return Err(self
                    .cluster
                    .failure("rbd_trash_list", target, -errno::ERANGE, t));
            }
            // SAFETY: librbd filled the first `n` entries.
            unsafe { buf.set_len(n) };
            let entries = buf
                .iter()
                .map(|e| TrashEntry {
                    // SAFETY: strings owned by librbd until the cleanup below.
                    id: unsafe { from_c(e.id) },
                    name: unsafe { from_c(e.name) },
                    source: TrashSource::from_c(e.source),
                    deleted: timestamp(e.deletion_time, 0),
                    deferment_end: timestamp(e.deferment_end_time, 0),
                })
                .collect();
            // SAFETY: the `n` entries librbd filled, cleaned up once.
            unsafe { (api.rbd_trash_list_cleanup)(buf.as_mut_ptr(), n) };
            last.store(n, Ordering::Relaxed);
            return Ok(entries);
        }
        Err(self
            .cluster
            .failure("rbd_trash_list", target, -errno::ERANGE, Instant::now()))
    }

    fn inspect(
        &self,
        id: &str,
        target: &Target,
        requests: &mut Requests,
    ) -> Result<ImageDetail, RbdError> {
        let api = self.api();
        let c_id = cstring("image id", id)?;
        let mut image: ffi::rbd_image_t = ptr::null_mut();
        let t = Instant::now();
        requests.open += 1;
        // SAFETY: valid ioctx, C string, out-pointer; no snapshot.
        let r = unsafe {
            (api.rbd_open_by_id_read_only)(self.io, c_id.as_ptr(), &mut image, ptr::null())
        };
        if r < 0 || image.is_null() {
            return Err(self.cluster.failure(
                "rbd_open_by_id_read_only",
                target,
                r.min(-errno::EIO),
                t,
            ));
        }
        let open = OpenImage {
            api,
            image,
            requests,
        };
        self.read_open(open, target)
    }

    fn read_open(&self, open: OpenImage<'_>, target: &Target) -> Result<ImageDetail, RbdError> {
        let api = open.api;
        let image = open.image;
        let fail = |call, r, t| self.cluster.failure(call, target, r, t);
        let mut open = open;

        // SAFETY: rbd_image_info_t is plain data; zeroes are a valid value.
        let mut info: ffi::rbd_image_info_t = unsafe { std::mem::zeroed() };
        let t = Instant::now();
        open.requests.stat += 1;
        // SAFETY: open image, out-pointer and its size.
        let r = unsafe { (api.rbd_stat)(image, &mut info, size_of::<ffi::rbd_image_info_t>()) };
        if r < 0 {
            return Err(fail("rbd_stat", r, t));
        }

        let mut ts = ffi::timespec::default();
        let t = Instant::now();
        open.requests.create_timestamp += 1;
        // SAFETY: open image, out-pointer.
        let r = unsafe { (api.rbd_get_create_timestamp)(image, &mut ts) };
        if r < 0 {
            return Err(fail("rbd_get_create_timestamp", r, t));
        }

        let watchers = self.watchers(&mut open, target)?;
        let metadata = self.metadata(&mut open, target)?;
        Ok(ImageDetail {
            size: info.size,
            created: timestamp(ts.tv_sec, ts.tv_nsec),
            watchers,
            metadata,
        })
    }

    fn watchers(
        &self,
        open: &mut OpenImage<'_>,
        target: &Target,
    ) -> Result<Vec<Watcher>, RbdError> {
        let api = open.api;
        let mut cap = 8usize;
        for _ in 0..RANGE_TRIES {
            let mut buf: Vec<ffi::rbd_image_watcher_t> = Vec::with_capacity(cap);
            let mut n = cap;
            let t = Instant::now();
            open.requests.watchers_list += 1;
            // SAFETY: room for `cap` watchers, and `n` says so.
            let r = unsafe { (api.rbd_watchers_list)(open.image, buf.as_mut_ptr(), &mut n) };
            if r == -errno::ERANGE {
                cap = n.max(cap).saturating_add(8);
                continue;
            }
            if r < 0 {
                return Err(self.cluster.failure("rbd_watchers_list", target, r, t));
            }
            if n > cap {
                return Err(self
                    .cluster
                    .failure("rbd_watchers_list", target, -errno::ERANGE, t));
            }
            // SAFETY: librbd filled the first `n` watchers.
            unsafe { buf.set_len(n) };
            let watchers = buf
                .iter()
                .map(|w| Watcher {
                    // SAFETY: owned by librbd until the cleanup below.
                    address: unsafe { from_c(w.addr) },
                    id: w.id,
                    cookie: w.cookie,
                })
                .collect();
            // SAFETY: the `n` watchers librbd filled, cleaned up once.
            unsafe { (api.rbd_watchers_list_cleanup)(buf.as_mut_ptr(), n) };
            return Ok(watchers);
        }
        Err(self
            .cluster
            .failure("rbd_watchers_list", target, -errno::ERANGE, Instant::now()))
    }

    fn metadata(
        &self,
        open: &mut OpenImage<'_>,
        target: &Target,
    ) -> Result<BTreeMap<String, String>, RbdError> {
        let api = open.api;
        let start = c"";
        let (mut kcap, mut vcap) = (4096usize, 16384usize);
        for _ in 0..RANGE_TRIES {
            let mut keys = vec![0u8; kcap];
            let mut values = vec![0u8; vcap];
            let (mut klen, mut vlen) = (kcap, vcap);
            let t = Instant::now();
            open.requests.metadata_list += 1;
            // SAFETY: both buffers are as long as the lengths passed; max 0 = every key.
            // (librbd checks both lengths before writing: verified on 16.2.15.)
            let r = unsafe {
                (api.rbd_metadata_list)(
                    open.image,
                    start.as_ptr(),
                    0,
                    keys.as_mut_ptr().cast(),
                    &mut klen,
                    values.as_mut_ptr().cast(),
                    &mut vlen,
                )
            };
            if r == -errno::ERANGE {
                kcap = klen.max(kcap).saturating_add(256);
                vcap = vlen.max(vcap).saturating_add(1024);
                continue;
            }
            if r < 0 {
                return Err(self.cluster.failure("rbd_metadata_list", target, r, t));
            }
            let (klen, vlen) = (klen.min(kcap), vlen.min(vcap));
            return decode::pair_metadata(&keys[..klen], &values[..vlen])
                .map(|pairs| pairs.into_iter().collect())
                .ok_or_else(|| {
                    RbdError::Other(Box::new(Failure {
                        call: "rbd_metadata_list",
                        target: target.clone(),
                        code: -errno::EBADMSG,
                        elapsed: t.elapsed(),
                    }))
                });
        }
        Err(self
            .cluster
            .failure("rbd_metadata_list", target, -errno::ERANGE, Instant::now()))
    }
}
