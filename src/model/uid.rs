//! Object uids as the stores keep them. Pure.
//!
//! The API server makes every uid a UUID in its canonical text form (36 characters, lowercase,
//! hyphenated). Kept as text, each is a 48-byte allocation besides its 16-byte pointer; a PV keeps
//! two (its own and its claimRef's) and a claim one, so at 50,000 PVs and 40,000 claims the text
//! costs about 7 MiB. A [`Uid`] keeps the 16 bytes inline, and any other text (a uid written by
//! hand or by a test) as it is, so that every uid reads back exactly as it was written.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A uid: the 16 bytes of a canonical UUID, or any other text as written.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    /// A UUID in canonical form (lowercase, hyphenated), as its 16 bytes.
    Uuid([u8; 16]),
    /// Anything else, as written.
    Other(Box<str>),
}

/// Byte offsets of the hyphens in a canonical UUID.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl Uid {
    /// `s`, as compactly as it reads back exactly.
    pub(crate) fn new(s: &str) -> Uid {
        parse(s).map_or_else(|| Uid::Other(s.into()), Uid::Uuid)
    }

    /// Whether it is the empty text.
    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Uid::Other(s) if s.is_empty())
    }
}

/// The bytes of `s` when it is a UUID in canonical form: only then does formatting them give `s`
/// back.
fn parse(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || HYPHENS.iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut digits = b.iter().enumerate().filter(|(i, _)| !HYPHENS.contains(i));
    let mut out = [0u8; 16];
    for byte in &mut out {
        let (_, &hi) = digits.next()?;
        let (_, &lo) = digits.next()?;
        *byte = nibble(hi)? << 4 | nibble(lo)?;
    }
    Some(out)
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uid::Other(s) => f.write_str(s),
            Uid::Uuid(b) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut out = [0u8; 36];
                let mut at = 0;
                for (i, byte) in b.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        out[at] = b'-';
                        at += 1;
                    }
                    out[at] = HEX[usize::from(byte >> 4)];
                    out[at + 1] = HEX[usize::from(byte & 0xf)];
                    at += 2;
                }
                // Only ASCII hex digits and hyphens were written.
                f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
            }
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl PartialEq<str> for Uid {
    fn eq(&self, other: &str) -> bool {
        match self {
            Uid::Other(s) => &**s == other,
            Uid::Uuid(b) => parse(other).as_ref() == Some(b),
        }
    }
}

impl From<&str> for Uid {
    fn from(s: &str) -> Uid {
        Uid::new(s)
    }
}

impl<'de> Deserialize<'de> for Uid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Uid, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Uid;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a uid (string)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Uid, E> {
                Ok(Uid::new(s))
            }
        }
        d.deserialize_str(Text)
    }
}
