//! Kubernetes resource quantities (`20Gi`, `21474836480`, `1.5T`, `5e9`) as a whole number of
//! bytes. Pure.
//!
//! Capacity is kept as written (`status.capacity`) and as bytes (`status.capacityBytes`), so that
//! people read what they wrote and tools can add it up. A fraction of a byte rounds up, as the
//! API server does when it canonicalises a quantity.

/// A number of bytes as a quantity, in the largest binary unit that divides it (`10Gi`,
/// `1536Mi`, `1000`).
pub(crate) fn format_bytes(b: i64) -> String {
    const UNITS: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    for (unit, shift) in UNITS {
        let size = 1i64 << shift;
        if b != 0 && b % size == 0 {
            return format!("{}{unit}", b / size);
        }
    }
    b.to_string()
}

/// The number of bytes a quantity stands for; `None` when it is not a quantity, is negative, or
/// does not fit an `i64`.
pub(crate) fn bytes(q: &str) -> Option<i64> {
    let q = q.trim();
    if q.is_empty() {
        return None;
    }
    let (number, suffix) = split(q);
    let (mantissa, scale) = decimal(number)?;
    // value = mantissa * 10^scale * multiplier
    let (base, exp): (u32, i32) = match suffix {
        "" => (10, 0),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        s => {
            // An exponent: e3, E-2.
            let e = s.strip_prefix(['e', 'E'])?.parse::<i32>().ok()?;
            (10, e)
        }
    };
    let (mut num, mut den): (i128, i128) = (mantissa, 1);
    let apply10 = |n: &mut i128, d: &mut i128, e: i32| -> Option<()> {
        if e >= 0 {
            *n = n.checked_mul(10i128.checked_pow(u32::try_from(e).ok()?)?)?;
        } else {
            *d = d.checked_mul(10i128.checked_pow(e.unsigned_abs())?)?;
        }
        Some(())
    };
    apply10(&mut num, &mut den, scale)?;
    if base == 2 {
        num = num.checked_mul(1i128.checked_shl(u32::try_from(exp).ok()?)?)?;
    } else {
        apply10(&mut num, &mut den, exp)?;
    }
    if num < 0 {
        return None;
    }
    // Round a fraction of a byte up (without `num + den - 1`, which overflows for a mantissa
    // near i128::MAX over a large negative exponent).
    let whole = num / den + i128::from(num % den != 0);
    i64::try_from(whole).ok()
}

/// Splits `1.5Gi` into (`1.5`, `Gi`) and `5e9` into (`5`, `e9`).
fn split(q: &str) -> (&str, &str) {
    let end = q
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '+' || *c == '-'))))
        .map_or(q.len(), |(i, _)| i);
    q.split_at(end)
}

/// `12.345` → (12345, -3).
fn decimal(s: &str) -> Option<(i128, i32)> {
    let (sign, digits) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let joined = format!("{int}{frac}");
    let joined = joined.trim_start_matches('0');
    let m: i128 = if joined.is_empty() {
        0
    } else {
        joined.parse().ok()?
    };
    Some((sign * m, -i32::try_from(frac.len()).ok()?))
}
