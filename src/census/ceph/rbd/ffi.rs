//! The few librados/librbd functions a read-only census calls, declared by hand from the Ceph
//! headers (`rados/librados.h`, `rbd/librbd.h`; all present since Nautilus 14.2, checked against
//! Pacific 16.2.15) and resolved at run time with `dlopen`/`dlsym` (libloading), so that the
//! binary has no link-time dependency on Ceph.
//!
//! Only functions that read are declared: no `rbd_create*`, `rbd_remove`, `rbd_trash_move`,
//! `rbd_metadata_set`, `rbd_open` (read-write), `rados_write*`, ... The list is [`SYMBOLS`]; a
//! unit test and the e2e test check it against an allow-list, so a write call cannot slip in.
//! The one generic call, `rados_exec`, is made in one place with the read-only `rbd.get_size`
//! (and the census's user has no `class-write` cap: the OSD would refuse a writing method).
#![allow(non_camel_case_types)]

use std::ffi::OsStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Mutex;

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

pub(crate) type rados_t = *mut c_void;
pub(crate) type rados_ioctx_t = *mut c_void;
pub(crate) type rbd_image_t = *mut c_void;

/// `rbd_image_spec_t`: what `rbd_list2` returns per image (strings owned by librbd until
/// `rbd_image_spec_list_cleanup`).
#[repr(C)]
pub(crate) struct rbd_image_spec_t {
    pub(crate) id: *mut c_char,
    pub(crate) name: *mut c_char,
}

pub(crate) const RBD_MAX_BLOCK_NAME_SIZE: usize = 24;
pub(crate) const RBD_MAX_IMAGE_NAME_SIZE: usize = 96;

/// `rbd_image_info_t` (`rbd_stat`; the size of the struct is passed along).
#[repr(C)]
pub(crate) struct rbd_image_info_t {
    pub(crate) size: u64,
    pub(crate) obj_size: u64,
    pub(crate) num_objs: u64,
    pub(crate) order: c_int,
    pub(crate) block_name_prefix: [c_char; RBD_MAX_BLOCK_NAME_SIZE],
    pub(crate) parent_pool: i64,
    pub(crate) parent_name: [c_char; RBD_MAX_IMAGE_NAME_SIZE],
}

/// `rbd_image_watcher_t` (`rbd_watchers_list`).
#[repr(C)]
pub(crate) struct rbd_image_watcher_t {
    pub(crate) addr: *mut c_char,
    pub(crate) id: i64,
    pub(crate) cookie: u64,
}

/// `rbd_trash_image_info_t` (`rbd_trash_list`); `source` is a C enum (int), the times are
/// `time_t` (64-bit on LP64 Linux).
#[repr(C)]
pub(crate) struct rbd_trash_image_info_t {
    pub(crate) id: *mut c_char,
    pub(crate) name: *mut c_char,
    pub(crate) source: c_int,
    pub(crate) deletion_time: i64,
    pub(crate) deferment_end_time: i64,
}

/// `struct timespec` on LP64 Linux.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct timespec {
    pub(crate) tv_sec: i64,
    pub(crate) tv_nsec: i64,
}

macro_rules! api {
    (
        rados { $( fn $rname:ident ( $($rty:ty),* ) $(-> $rret:ty)? ; )* }
        rbd { $( fn $bname:ident ( $($bty:ty),* ) $(-> $bret:ty)? ; )* }
    ) => {
        /// The resolved functions. Loaded once per pair of library paths and never unloaded
        /// (unloading librados, with its threads and static state, is not worth the risk).
        pub(crate) struct Api {
            $( pub $rname: unsafe extern "C" fn($($rty),*) $(-> $rret)?, )*
            $( pub $bname: unsafe extern "C" fn($($bty),*) $(-> $bret)?, )*
            /// Keeps both libraries mapped for as long as the pointers live (forever).
            _libs: (Library, Library),
        }

        /// Every symbol this module resolves: librados first, then librbd.
        pub const SYMBOLS: &[&str] = &[
            $( stringify!($rname), )*
            $( stringify!($bname), )*
        ];

        impl Api {
            fn resolve(rados: Library, rbd: Library, rados_path: &str, rbd_path: &str) -> Result<Api, LoadError> {
                // SAFETY: each symbol is looked up with the signature declared above, copied
                // from the Ceph headers; the libraries stay loaded with the pointers.
                unsafe {
                    Ok(Api {
                        $( $rname: *rados
                            .get::<unsafe extern "C" fn($($rty),*) $(-> $rret)?>(
                                concat!(stringify!($rname), "\0").as_bytes())
                            .map_err(|e| LoadError { library: rados_path.to_string(), message: e.to_string() })?, )*
                        $( $bname: *rbd
                            .get::<unsafe extern "C" fn($($bty),*) $(-> $bret)?>(
                                concat!(stringify!($bname), "\0").as_bytes())
                            .map_err(|e| LoadError { library: rbd_path.to_string(), message: e.to_string() })?, )*
                        _libs: (rados, rbd),
                    })
                }
            }
        }
    };
}

api! {
    rados {
        fn rados_create2(*mut rados_t, *const c_char, *const c_char, u64) -> c_int;
        fn rados_conf_read_file(rados_t, *const c_char) -> c_int;
        fn rados_conf_set(rados_t, *const c_char, *const c_char) -> c_int;
        fn rados_connect(rados_t) -> c_int;
        fn rados_shutdown(rados_t);
        fn rados_cluster_fsid(rados_t, *mut c_char, usize) -> c_int;
        fn rados_pool_lookup(rados_t, *const c_char) -> i64;
        fn rados_ioctx_create(rados_t, *const c_char, *mut rados_ioctx_t) -> c_int;
        fn rados_ioctx_destroy(rados_ioctx_t);
        fn rados_ioctx_set_namespace(rados_ioctx_t, *const c_char);
        fn rados_exec(rados_ioctx_t, *const c_char, *const c_char, *const c_char, *const c_char, usize, *mut c_char, usize) -> c_int;
    }
    rbd {
        fn rbd_version(*mut c_int, *mut c_int, *mut c_int);
        fn rbd_namespace_exists(rados_ioctx_t, *const c_char, *mut bool) -> c_int;
        fn rbd_list2(rados_ioctx_t, *mut rbd_image_spec_t, *mut usize) -> c_int;
        fn rbd_image_spec_list_cleanup(*mut rbd_image_spec_t, usize);
        fn rbd_trash_list(rados_ioctx_t, *mut rbd_trash_image_info_t, *mut usize) -> c_int;
        fn rbd_trash_list_cleanup(*mut rbd_trash_image_info_t, usize);
        fn rbd_open_by_id_read_only(rados_ioctx_t, *const c_char, *mut rbd_image_t, *const c_char) -> c_int;
        fn rbd_close(rbd_image_t) -> c_int;
        fn rbd_stat(rbd_image_t, *mut rbd_image_info_t, usize) -> c_int;
        fn rbd_get_create_timestamp(rbd_image_t, *mut timespec) -> c_int;
        fn rbd_watchers_list(rbd_image_t, *mut rbd_image_watcher_t, *mut usize) -> c_int;
        fn rbd_watchers_list_cleanup(*mut rbd_image_watcher_t, usize);
        fn rbd_metadata_list(rbd_image_t, *const c_char, u64, *mut c_char, *mut usize, *mut c_char, *mut usize) -> c_int;
    }
}

/// The read-only calls the census may make; everything in [`SYMBOLS`] must be here.
pub const READ_ONLY: &[&str] = &[
    // connection handling (local, or the monitor session: authentication, maps)
    "rados_create2",
    "rados_conf_read_file",
    "rados_conf_set",
    "rados_connect",
    "rados_shutdown",
    "rados_cluster_fsid",
    "rados_pool_lookup",
    "rados_ioctx_create",
    "rados_ioctx_destroy",
    "rados_ioctx_set_namespace",
    // An object class method call: called only as `rbd.get_size` on an image's header (a method
    // the OSD registers as read-only and runs with the `class-read` cap), through
    // `IoCtx::header_size`, whose class and method are constants.
    "rados_exec",
    // librbd reads
    "rbd_version",
    "rbd_namespace_exists",
    "rbd_list2",
    "rbd_image_spec_list_cleanup",
    "rbd_trash_list",
    "rbd_trash_list_cleanup",
    "rbd_open_by_id_read_only",
    "rbd_close",
    "rbd_stat",
    "rbd_get_create_timestamp",
    "rbd_watchers_list",
    "rbd_watchers_list_cleanup",
    "rbd_metadata_list",
];

/// Why a library could not be loaded: the path asked for and dlerror()'s text.
#[derive(Clone, Debug)]
pub(crate) struct LoadError {
    pub(crate) library: String,
    pub(crate) message: String,
}

/// Library paths used unless overridden (`VL_LIBRBD_PATH`, `VL_LIBRADOS_PATH`): the sonames of
/// the Debian/Ubuntu/RHEL packages librbd1 and librados2.
pub const DEFAULT_LIBRBD: &str = "librbd.so.1";
pub const DEFAULT_LIBRADOS: &str = "librados.so.2";

type Loaded = Vec<((String, String), &'static Api)>;
static LOADED: Mutex<Loaded> = Mutex::new(Vec::new());

/// The library paths from the environment (or the defaults).
pub(crate) fn paths() -> (String, String) {
    let var = |k: &str, d: &str| {
        std::env::var(k)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| d.to_string())
    };
    (
        var("VL_LIBRADOS_PATH", DEFAULT_LIBRADOS),
        var("VL_LIBRBD_PATH", DEFAULT_LIBRBD),
    )
}

/// Loads librados and librbd (once per pair of paths; a failure is not remembered, so a later
/// call may succeed once the package is installed) and resolves every symbol.
pub(crate) fn load() -> Result<&'static Api, LoadError> {
    let (rados_path, rbd_path) = paths();
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, api)) = loaded
        .iter()
        .find(|((r, b), _)| *r == rados_path && *b == rbd_path)
    {
        return Ok(api);
    }
    let open = |path: &str| {
        // SAFETY: loading librados/librbd runs their initialisers (C++ static constructors,
        // tracepoint registration), which have no preconditions. RTLD_NOW: a missing symbol
        // of theirs fails here, not in the middle of a census.
        unsafe { Library::open(Some(OsStr::new(path)), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
            LoadError {
                library: path.to_string(),
                message: e.to_string(),
            }
        })
    };
    let rados = open(&rados_path)?;
    let rbd = open(&rbd_path)?;
    let api: &'static Api = Box::leak(Box::new(Api::resolve(rados, rbd, &rados_path, &rbd_path)?));
    loaded.push(((rados_path, rbd_path), api));
    Ok(api)
}
