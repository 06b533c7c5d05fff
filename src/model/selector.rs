//! Kubernetes label selectors (`team=storage,env!=prod,keep,!tmp,tier in (a,b),zone notin (x)`),
//! parsed once and matched against a PV's labels. Pure.

use std::collections::BTreeMap;
use std::fmt;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the key is absent).
    NotEquals(String, String),
    /// `key`.
    Exists(String),
    /// `!key`.
    NotExists(String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also true when the key is absent).
    NotIn(String, Vec<String>),
}

/// A parsed selector: every requirement must hold. An empty selector matches nothing here (it is
/// used to exclude volumes, and "exclude everything" must be asked for explicitly).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match r {
                Requirement::Equals(k, v) => format!("{k}={v}"),
                Requirement::NotEquals(k, v) => format!("{k}!={v}"),
                Requirement::Exists(k) => k.clone(),
                Requirement::NotExists(k) => format!("!{k}"),
                Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl Selector {
    /// Parses a selector; the error says what is wrong and where.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut out = Vec::new();
        for part in split_top(s)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("empty requirement in {s:?}"));
            }
            out.push(requirement(part)?);
        }
        Ok(Selector(out))
    }

    /// Whether `labels` satisfy every requirement (false for an empty selector).
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v),
            Requirement::NotEquals(k, v) => get(k) != Some(v),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ')' in {s:?}"));
                }
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in {s:?}"));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn key(k: &str) -> Result<String, String> {
    let k = k.trim();
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && name
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.'))
    });
    if name_ok && prefix_ok {
        Ok(k.to_string())
    } else {
        Err(format!("{k:?} is not a label key"))
    }
}

fn value(v: &str) -> Result<String, String> {
    let v = v.trim();
    if crate::model::labels::is_label_value(v) || v.is_empty() {
        Ok(v.to_string())
    } else {
        Err(format!("{v:?} is not a label value"))
    }
}

fn set(s: &str) -> Result<Vec<String>, String> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("{s:?}: a set is written (a,b)"))?;
    inner.split(',').map(value).collect()
}

fn requirement(p: &str) -> Result<Requirement, String> {
    if let Some((k, v)) = p.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, value(v)?));
    }
    if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
        return Ok(Requirement::Equals(key(k)?, value(v)?));
    }
    if let Some(k) = p.strip_prefix('!') {
        return Ok(Requirement::NotExists(key(k)?));
    }
    let words: Vec<&str> = p.splitn(2, char::is_whitespace).collect();
    if let [k, rest] = words[..] {
        let rest = rest.trim_start();
        if let Some(set_text) = rest.strip_prefix("notin") {
            return Ok(Requirement::NotIn(key(k)?, set(set_text)?));
        }
        if let Some(set_text) = rest.strip_prefix("in") {
            return Ok(Requirement::In(key(k)?, set(set_text)?));
        }
        return Err(format!("{p:?}: expected 'in (...)' or 'notin (...)'"));
    }
    Ok(Requirement::Exists(key(p)?))
}
