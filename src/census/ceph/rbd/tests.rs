//! Unit tests of the pure parts: handle and name decoding, buffer splitting, error categories,
//! messages, the read-only symbol list. No Ceph.

use std::time::Duration;

use super::decode::*;
use super::*;

const FSID: &str = "8f4a1a5c-7f2e-11ee-b962-0242ac120002";
const UUID: &str = "5f6c7d8e-9a0b-11ee-b962-0242ac120002";

fn handle(cluster: &str, pool: &str, uuid: &str) -> String {
    format!("0001-{:04x}-{cluster}-{pool}-{uuid}", cluster.len())
}

#[test]
fn parses_a_ceph_csi_handle() {
    let h = handle(FSID, "0000000000000003", UUID);
    assert_eq!(h.len(), 64 + FSID.len());
    let v = parse_volume_handle(&h).unwrap();
    assert_eq!(
        v,
        VolumeHandle {
            version: 1,
            cluster_id: FSID.into(),
            pool_id: 3,
            uuid: UUID.into()
        }
    );
    assert_eq!(v.image_name(), format!("csi-vol-{UUID}"));
    assert_eq!(v.image_name_with_prefix("k8s-"), format!("k8s-{UUID}"));
}

#[test]
fn parses_handles_with_odd_but_valid_cluster_ids() {
    // Empty, a short name, one with dashes that look like fields, and non-ASCII (the length is
    // in bytes, as Go's len()).
    for cluster in ["", "rook-ceph", "0001-0024-x", "prod-ünïcode"] {
        let h = handle(cluster, "00000000000000ff", UUID);
        let v = parse_volume_handle(&h).unwrap_or_else(|e| panic!("{h}: {e}"));
        assert_eq!(v.cluster_id, cluster);
        assert_eq!(v.pool_id, 255);
        assert_eq!(v.uuid, UUID);
    }
    // A pool id with the top bit set decodes as ceph-csi's int64 does.
    let v = parse_volume_handle(&handle("c", "ffffffffffffffff", UUID)).unwrap();
    assert_eq!(v.pool_id, -1);
    // Upper-case hex is still hex.
    let v = parse_volume_handle(&handle("c", "00000000000000AB", &UUID.to_uppercase())).unwrap();
    assert_eq!(v.pool_id, 0xab);
}

#[test]
fn refuses_malformed_handles_without_panicking() {
    let good = handle(FSID, "0000000000000003", UUID);
    let cases: Vec<(String, HandleError)> = vec![
        (String::new(), HandleError::TooShort),
        ("0001".into(), HandleError::TooShort),
        (
            good[..good.len() - 1].into(),
            HandleError::BadClusterIdLength,
        ),
        (format!("{good}0"), HandleError::BadUuid),
        (
            good.replacen("0001", "0002", 1),
            HandleError::UnsupportedVersion(2),
        ),
        (good.replacen("0001", "+001", 1), HandleError::BadVersion),
        (good.replacen("0001", "zz01", 1), HandleError::BadVersion),
        (
            good.replacen("0001-", "0001_", 1),
            HandleError::BadSeparator(4),
        ),
        (
            good.replacen("-0024-", "-00g4-", 1),
            HandleError::BadClusterIdLength,
        ),
        (
            good.replacen("-0024-", "-+024-", 1),
            HandleError::BadClusterIdLength,
        ),
        // The length says 0x25: the cluster id would swallow the separator.
        (
            good.replacen("-0024-", "-0025-", 1),
            HandleError::BadClusterIdLength,
        ),
        // The length says 0x23: what follows the cluster id is not '-'.
        (good.replacen("-0024-", "-0023-", 1), HandleError::BadUuid),
        (
            good.replacen("0000000000000003", "000000000000000x", 1),
            HandleError::BadPoolId,
        ),
        (
            good.replacen("0000000000000003", "+000000000000003", 1),
            HandleError::BadPoolId,
        ),
        (
            good.replacen("-0000000000000003-", "_0000000000000003-", 1),
            HandleError::BadSeparator(10 + FSID.len()),
        ),
        (
            good.replacen("-0000000000000003-", "-0000000000000003_", 1),
            HandleError::BadSeparator(10 + FSID.len() + 17),
        ),
        (
            good.replace(UUID, &UUID.replace('-', "x")),
            HandleError::BadUuid,
        ),
        (
            good.replace(UUID, "5f6c7d8e-9a0b-11ee-b962-0242ac12000g"),
            HandleError::BadUuid,
        ),
        // A static PV's handle is just the image name.
        (format!("csi-vol-{UUID}"), HandleError::TooShort),
    ];
    for (input, want) in cases {
        assert_eq!(parse_volume_handle(&input), Err(want.clone()), "{input:?}");
        assert!(!want.to_string().is_empty());
    }
    // A multi-byte character cut by the cluster id length, or in place of a field.
    let cut = format!("0001-0001-é-0000000000000003-{UUID}");
    assert!(parse_volume_handle(&cut).is_err());
    let wide = format!("0001-0002-é-000000000000000é-{UUID}");
    assert!(parse_volume_handle(&wide).is_err());
    let wide_uuid = format!("0001-0001-c-0000000000000003-{}é", &UUID[..34]);
    assert!(parse_volume_handle(&wide_uuid).is_err());
}

#[test]
fn no_input_panics_the_handle_parser() {
    // Every prefix and every single-byte change of a valid handle, plus a few byte soups.
    let good = handle("prod-ünïcode", "0000000000000003", UUID);
    for end in 0..=good.len() {
        if let Some(p) = good.get(..end) {
            let _ = parse_volume_handle(p);
        }
    }
    for at in 0..good.len() {
        for c in ['-', '0', 'f', 'é', '\0', ' '] {
            let mut s: Vec<char> = good.chars().collect();
            if at < s.len() {
                s[at] = c;
            }
            let _ = parse_volume_handle(&s.into_iter().collect::<String>());
        }
    }
    for soup in [
        "-".repeat(100),
        "0".repeat(64),
        "é".repeat(40),
        "\0".repeat(70),
    ] {
        assert!(parse_volume_handle(&soup).is_err());
    }
}

#[test]
fn image_names() {
    assert_eq!(csi_volume_uuid(&format!("csi-vol-{UUID}")), Some(UUID));
    assert_eq!(
        image_uuid(&format!("csi-snap-{UUID}"), CSI_SNAPSHOT_PREFIX),
        Some(UUID)
    );
    assert_eq!(image_uuid(&format!("tenant-{UUID}"), "tenant-"), Some(UUID));
    for bad in [
        "",
        "csi-vol-",
        "csi-vol",
        "pvc-123",
        &format!("csi-snap-{UUID}"),
        &format!("csi-vol-{UUID}x"),
        &format!("csi-vol-{}", &UUID[1..]),
        &format!("csi-vol-{}", UUID.replace('-', "")),
        &format!("csi-vol-{}é", &UUID[..35]),
        &format!("CSI-VOL-{UUID}"),
    ] {
        assert_eq!(csi_volume_uuid(bad), None, "{bad:?}");
    }
    assert!(is_uuid(UUID));
    assert!(!is_uuid(&UUID.replace('-', "_")));
}

#[test]
fn splits_nul_terminated_buffers_keeping_empty_strings() {
    assert_eq!(split_nul_terminated(b""), Vec::<String>::new());
    assert_eq!(split_nul_terminated(b"a\0"), vec!["a"]);
    assert_eq!(split_nul_terminated(b"a\0\0b\0"), vec!["a", "", "b"]);
    assert_eq!(split_nul_terminated(b"\0"), vec![""]);
    // No terminator after the last one: still a string.
    assert_eq!(split_nul_terminated(b"a\0b"), vec!["a", "b"]);
    // Not UTF-8: replaced, not dropped.
    assert_eq!(split_nul_terminated(b"\xff\0"), vec!["\u{fffd}"]);
}

#[test]
fn pairs_metadata_or_refuses() {
    let pairs = pair_metadata(b"csi.storage.k8s.io/pv/name\0empty\0", b"pvc-1\0\0").unwrap();
    assert_eq!(
        pairs,
        vec![
            (
                "csi.storage.k8s.io/pv/name".to_string(),
                "pvc-1".to_string()
            ),
            ("empty".to_string(), String::new())
        ]
    );
    assert_eq!(pair_metadata(b"", b""), Some(vec![]));
    // A value holding a NUL: two values for one key. Refused, never mispaired.
    assert_eq!(pair_metadata(b"k\0", b"a\0b\0"), None);
}

#[test]
fn c_buffers() {
    assert_eq!(c_buffer_str(b"abc\0\0\0"), "abc");
    assert_eq!(c_buffer_str(b"abc"), "abc");
    assert_eq!(c_buffer_str(b""), "");
}

#[test]
fn categories_of_codes() {
    use Category::*;
    for code in [-110, -111, -107, -108, -104, -103, -100, -101, -112, -113] {
        assert_eq!(categorize("rbd_list2", code), Unavailable, "{code}");
        assert_eq!(categorize("rados_connect", code), Unavailable, "{code}");
    }
    assert_eq!(categorize("rbd_list2", -13), Forbidden);
    assert_eq!(categorize("rados_connect", -1), Forbidden);
    assert_eq!(categorize("rados_pool_lookup", -2), NotFound);
    assert_eq!(categorize("rados_ioctx_create", -2), NotFound);
    assert_eq!(categorize("rbd_namespace_exists", -2), NotFound);
    // A missing keyring is not a missing pool.
    assert_eq!(categorize("rados_connect", -2), Config);
    assert_eq!(categorize("rados_conf_read_file", -2), Config);
    assert_eq!(categorize("rados_conf_set", -22), Config);
    // An image that vanished is neither.
    assert_eq!(categorize("rbd_open_by_id_read_only", -2), Other);
    assert_eq!(categorize("rbd_list2", -22), Other);
    assert_eq!(categorize("rbd_list2", -5), Other);
    // Nonsense codes do not panic.
    assert_eq!(categorize("rbd_list2", i32::MIN), Other);
    assert_eq!(categorize("rbd_list2", 0), Other);
    assert_eq!(categorize("rbd_list2", 7), Other);
    assert_eq!(Unavailable.as_str(), "unavailable");
    assert_eq!(LibraryMissing.to_string(), "library_missing");
}

#[test]
fn strerror_is_plain() {
    assert_eq!(strerror(-110), "Connection timed out");
    assert_eq!(strerror(-1), "Operation not permitted");
    assert!(!strerror(i32::MIN).contains("os error"));
}

#[test]
fn timeouts_are_whole_seconds_of_at_least_one() {
    assert_eq!(timeout_secs(Duration::ZERO), 1);
    assert_eq!(timeout_secs(Duration::from_millis(1)), 1);
    assert_eq!(timeout_secs(Duration::from_secs(5)), 5);
    assert_eq!(timeout_secs(Duration::from_millis(5001)), 6);
}

fn failure(call: &'static str, code: i32) -> Failure {
    Failure {
        call,
        target: Target::Pool {
            pool: "k8s-rbd".into(),
            namespace: Some("tenant".into()),
        },
        code,
        elapsed: Duration::from_millis(5012),
    }
}

#[test]
fn errors_say_what_and_where_in_one_line() {
    let e = RbdError::from_failure(failure("rbd_list2", -110));
    assert_eq!(e.category(), Category::Unavailable);
    assert!(e.aborts_census());
    assert_eq!(
        e.to_string(),
        "Ceph is unavailable: rbd_list2 on pool k8s-rbd/tenant: Connection timed out (-110) after \
         5.0 s; the census is incomplete, nothing is known about the images"
    );
    let e = RbdError::from_failure(failure("rbd_list2", -1));
    assert_eq!(e.category(), Category::Forbidden);
    assert!(e.aborts_census());
    assert!(e.to_string().contains(
        "rbd_list2 on pool k8s-rbd/tenant: Operation not permitted (-1) after 5.0 s (check the \
         user's caps"
    ));
    let quick = Failure {
        elapsed: Duration::from_millis(3),
        ..failure("rados_connect", -13)
    };
    assert_eq!(
        RbdError::from_failure(quick).to_string(),
        "Ceph refused the request: rados_connect on pool k8s-rbd/tenant: Permission denied (-13) \
         (the user's key was refused: check the user name and its key)"
    );
    let e = RbdError::from_failure(failure("rados_pool_lookup", -2));
    assert_eq!(e.category(), Category::NotFound);
    assert!(!e.aborts_census());
    let e = RbdError::from_failure(failure("rbd_trash_list", -5));
    assert_eq!(e.category(), Category::Other);
    assert_eq!(e.failure().map(|f| f.code), Some(-5));
    let e = RbdError::LibraryMissing {
        library: "librbd.so.1".into(),
        message: "librbd.so.1: cannot open shared object file: No such file or directory".into(),
    };
    assert_eq!(e.category(), Category::LibraryMissing);
    assert!(e.failure().is_none());
    let image = Target::Image {
        pool: "p".into(),
        namespace: None,
        name: "csi-vol-x".into(),
        id: "10ab".into(),
    };
    assert_eq!(image.to_string(), "image p/csi-vol-x (id 10ab)");
    let cluster = Target::Cluster {
        monitors: "[v2:127.0.0.1:3300]".into(),
        user: "client.leftovers".into(),
    };
    assert_eq!(
        cluster.to_string(),
        "monitors [v2:127.0.0.1:3300] as client.leftovers"
    );
    for e in [
        RbdError::from_failure(failure("rbd_list2", -110)),
        RbdError::Config("x".into()),
        e,
    ] {
        assert!(!e.to_string().contains('\n'));
    }
}

#[test]
fn only_read_calls_are_declared() {
    // Every symbol resolved is on the read-only list, and none is named like a write: no
    // word of its name is a verb that changes an object.
    let writes = [
        "create",
        "create2",
        "create3",
        "create4",
        "remove",
        "rm",
        "write",
        "write2",
        "set",
        "move",
        "mv",
        "rename",
        "resize",
        "snap",
        "lock",
        "flatten",
        "clone",
        "purge",
        "restore",
        "watch",
        "watch2",
        "notify",
        "copy",
        "copy2",
        "mirror",
        "append",
        "truncate",
        "exec",
        "aio",
        "update",
        "sparsify",
        "migration",
        "discard",
        "rollback",
        "protect",
        "unprotect",
        "enable",
        "disable",
        "promote",
        "demote",
        "resync",
        "trim",
    ];
    // Named like a write, but local or a getter: a cluster handle and its options, an I/O
    // context and its namespace (client-side state), the image's creation time.
    let not_writes = [
        "rados_create2",
        "rados_conf_set",
        "rados_ioctx_create",
        "rados_ioctx_set_namespace",
        "rbd_get_create_timestamp",
        // A class method call: checked below to be made once, as the read-only rbd.get_size.
        "rados_exec",
    ];
    for s in SYMBOLS {
        assert!(READ_ONLY.contains(s), "{s} is not on the read-only list");
        if !not_writes.contains(s) {
            for word in s.split('_') {
                assert!(!writes.contains(&word), "{s} looks like a write ({word})");
            }
        }
    }
    assert!(SYMBOLS.contains(&"rbd_open_by_id_read_only"));
    assert!(
        !SYMBOLS
            .iter()
            .any(|s| *s == "rbd_open" || *s == "rbd_open_by_id")
    );
    assert_eq!(SYMBOLS.len(), READ_ONLY.len());
}

#[test]
fn the_one_class_method_called_is_rbd_get_size() {
    // `rados_exec` can call any method of any object class, writing ones too: the census calls
    // it in one place, with a constant class and method that only read.
    let source = include_str!("mod.rs");
    assert_eq!(source.matches(".rados_exec)").count(), 1);
    let call = &source[source.find(".rados_exec)").unwrap()..];
    let call = &call[..call.find(')').map_or(0, |i| i + 200).min(call.len())];
    assert!(
        call.contains(r#"c"rbd""#) && call.contains(r#"c"get_size""#),
        "{call}"
    );
}

#[test]
fn get_size_replies() {
    // cls_rbd encodes the order (u8) then the size (u64 LE).
    let mut reply = vec![22u8];
    reply.extend_from_slice(&(10u64 << 30).to_le_bytes());
    assert_eq!(decode::get_size_reply(&reply), Some(10 << 30));
    assert_eq!(decode::get_size_reply(&reply[..8]), None);
    assert_eq!(decode::get_size_reply(&[]), None);
    let mut long = reply.clone();
    long.push(0);
    assert_eq!(decode::get_size_reply(&long), None);
    assert_eq!(decode::CEPH_NOSNAP, 0xffff_ffff_ffff_fffe);
}

#[test]
fn config_debug_hides_the_key() {
    let c = CephConfig {
        mon_host: "m".into(),
        user: "client.leftovers".into(),
        keyring: None,
        key: Some("AQBsecret==".into()),
        conf_file: None,
        timeout: Duration::from_secs(5),
    };
    assert!(!format!("{c:?}").contains("AQBsecret"));
    assert_eq!(c.client_name(), "client.leftovers");
    let c = CephConfig {
        user: "leftovers".into(),
        ..c
    };
    assert_eq!(c.client_name(), "client.leftovers");
}

fn config(mon_host: &str, key: Option<&str>, keyring: Option<&str>) -> CephConfig {
    CephConfig {
        mon_host: mon_host.into(),
        user: "leftovers".into(),
        keyring: keyring.map(PathBuf::from),
        key: key.map(str::to_string),
        conf_file: None,
        timeout: Duration::from_millis(1500),
    }
}

#[test]
fn connect_options_bound_every_wait_and_write_no_file() {
    let owned = |o: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
        o.iter().map(|(k, v)| (*k, v.to_string())).collect()
    };
    let fixed = [
        ("client_mount_timeout", "2"),
        ("rados_mon_op_timeout", "2"),
        ("rados_osd_op_timeout", "2"),
        ("log_file", ""),
        ("admin_socket", ""),
        ("log_to_stderr", "false"),
        ("err_to_stderr", "false"),
    ];
    // A key and no keyring: an empty keyring, so that none in /etc/ceph is read.
    let mut want = owned(&[("mon_host", "m:6789"), ("keyring", ""), ("key", "AQB=")]);
    want.extend(owned(&fixed));
    assert_eq!(options(&config("m:6789", Some("AQB="), None)), want);
    // A keyring (and the monitors from a ceph.conf): the keyring, and no mon_host.
    let mut want = owned(&[("keyring", "/k")]);
    want.extend(owned(&fixed));
    assert_eq!(options(&config("", None, Some("/k"))), want);
}

#[test]
fn connect_refuses_a_configuration_without_user_or_monitors() {
    let no_user = CephConfig {
        user: "client.".into(),
        ..config("m:6789", None, None)
    };
    assert_eq!(
        cluster_target(&no_user),
        Err(RbdError::Config("no user given".into()))
    );
    assert!(matches!(
        cluster_target(&config("", None, None)),
        Err(RbdError::Config(m)) if m.contains("no monitor address")
    ));
    let from_file = CephConfig {
        conf_file: Some("/etc/ceph/ceph.conf".into()),
        ..config("", None, None)
    };
    assert_eq!(
        cluster_target(&from_file),
        Ok(Target::Cluster {
            monitors: "of /etc/ceph/ceph.conf".into(),
            user: "client.leftovers".into(),
        })
    );
}

#[test]
fn a_detail_timeout_costs_one_image_until_there_are_three_in_a_row() {
    let open = |code| RbdError::from_failure(failure("rbd_open_by_id_read_only", code));
    let timeout = || Err(open(-110));
    assert_eq!(DETAIL_TIMEOUTS, 3);
    assert_eq!(detail_of(timeout(), 1), Ok(Detail::Failed(open(-110))));
    assert_eq!(detail_of(timeout(), 2), Ok(Detail::Failed(open(-110))));
    assert_eq!(detail_of(timeout(), 3), Err(open(-110)));
    // A refusal ends the census at once; an image removed since the listing is gone; any
    // other error costs that image its detail.
    assert_eq!(detail_of(Err(open(-13)), 0), Err(open(-13)));
    assert_eq!(detail_of(Err(open(-2)), 0), Ok(Detail::Gone));
    assert_eq!(detail_of(Err(open(-5)), 0), Ok(Detail::Failed(open(-5))));
    let read = ImageDetail {
        size: 1,
        created: None,
        watchers: vec![],
        metadata: BTreeMap::new(),
    };
    assert_eq!(
        detail_of(Ok(Detail::Read(read.clone())), 0),
        Ok(Detail::Read(read))
    );
    // A size read is bound by the same rules.
    let size = |code| RbdError::from_failure(failure("rbd.get_size", code));
    assert_eq!(detail_of(Err(size(-110)), 3), Err(size(-110)));
    assert_eq!(detail_of(Err(size(-2)), 0), Ok(Detail::Gone));
    assert_eq!(detail_of(Ok(Detail::Size(7)), 0), Ok(Detail::Size(7)));
}

#[test]
fn csi_owner_from_metadata() {
    let mut d = ImageDetail {
        size: 1,
        created: None,
        watchers: vec![],
        metadata: BTreeMap::new(),
    };
    assert_eq!(d.csi_owner(), None);
    d.metadata.insert("other".into(), "x".into());
    assert_eq!(d.csi_owner(), None);
    d.metadata.insert(META_PVC_NAME.into(), "data-0".into());
    d.metadata.insert(META_PVC_NAMESPACE.into(), "db".into());
    assert_eq!(
        d.csi_owner(),
        Some(CsiOwner {
            pv_name: None,
            pvc_name: Some("data-0".into()),
            pvc_namespace: Some("db".into()),
            cluster_name: None,
        })
    );
}

#[test]
fn timestamps_and_trash_sources() {
    assert_eq!(timestamp(0, 0), None);
    assert_eq!(
        timestamp(1_700_000_000, 5).map(|t| t.as_nanosecond()),
        Some(1_700_000_000_000_000_005)
    );
    assert_eq!(timestamp(i64::MAX, 0), None);
    assert_eq!(timestamp(1, i64::MAX), None);
    assert_eq!(TrashSource::from_c(0), TrashSource::User);
    assert_eq!(TrashSource::from_c(3), TrashSource::Removing);
    assert_eq!(TrashSource::from_c(9), TrashSource::Unknown(9));
}

#[test]
fn buffers_are_sized_from_the_last_census() {
    assert_eq!(buffer_size(4096, 0), 4096);
    assert_eq!(buffer_size(4096, 10_000), 10_000 + 1_250 + 64);
    assert_eq!(buffer_size(1, usize::MAX), usize::MAX);
}
