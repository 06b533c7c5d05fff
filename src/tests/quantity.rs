//! Quantities as bytes, as the API server reads them.

use crate::model::quantity::bytes;

#[test]
fn binary_and_decimal_suffixes() {
    assert_eq!(bytes("250Mi"), Some(250 * 1024 * 1024));
    assert_eq!(bytes("20Gi"), Some(21_474_836_480));
    assert_eq!(bytes("1Ki"), Some(1024));
    assert_eq!(bytes("1Ti"), Some(1 << 40));
    assert_eq!(bytes("1Ei"), Some(1 << 60));
    assert_eq!(bytes("1k"), Some(1000));
    assert_eq!(bytes("5G"), Some(5_000_000_000));
    assert_eq!(bytes("2P"), Some(2_000_000_000_000_000));
}

#[test]
fn plain_numbers_and_exponents() {
    assert_eq!(bytes("21474836480"), Some(21_474_836_480));
    assert_eq!(bytes("5e9"), Some(5_000_000_000));
    assert_eq!(bytes("1E3"), Some(1000));
    assert_eq!(bytes("0"), Some(0));
}

#[test]
fn fractions_round_up_to_a_whole_byte() {
    assert_eq!(bytes("1.5Gi"), Some(1_610_612_736));
    assert_eq!(bytes("0.5"), Some(1));
    assert_eq!(bytes("100m"), Some(1));
    assert_eq!(bytes("1.5k"), Some(1500));
}

#[test]
fn what_is_not_a_quantity_is_none_never_a_panic() {
    for bad in [
        "",
        "Gi",
        "abc",
        "1.2.3Gi",
        "-5Gi",
        "1Zi",
        "1e",
        "99999999999Ei",
        "1e400",
        "--1",
    ] {
        assert_eq!(bytes(bad), None, "{bad:?}");
    }
}

#[test]
fn a_huge_mantissa_over_a_large_negative_exponent_is_a_quantity_never_a_panic() {
    // i128::MAX itself, as a mantissa, over 10^38: rounding up must not overflow.
    assert_eq!(
        bytes("170141183460469231731687303715884105727e-38"),
        Some(2)
    );
    assert_eq!(bytes("99999999999999999999999999999999999999e-38"), Some(1));
}

proptest::proptest! {
    /// A PV's capacity is whatever string the API server stored: any string is a number of
    /// bytes or `None`, never a panic.
    #[test]
    fn any_string_is_bytes_or_none(q in "[-+]?[0-9]{0,45}(\\.[0-9]{0,45})?([eE][-+]?[0-9]{1,4}|[KMGTPE]i?|[num]|k)?") {
        if let Some(b) = bytes(&q) {
            proptest::prop_assert!(b >= 0);
        }
    }
}
