//! Text from elsewhere (a backend's error, a resizer's condition message) made fit for one line
//! of a log, `scan`'s stderr or a finding's message. Pure.

/// The longest line of text from elsewhere, in characters. A service's message can be a page long (an AWS
/// encoded authorization message, a proxy's HTML page); a line longer than this says no more
/// to the person reading the log or `scan`'s stderr, and would bury the lines around it.
pub(crate) const LINE_BOUND: usize = 300;

/// `text` as one line of at most [`LINE_BOUND`] characters: every run of whitespace or control
/// characters (a service message's newlines, tabs) becomes one space, and a longer text is cut
/// on a character boundary and ends with `…`. Every backend's failure line and every quoted
/// condition message goes through it, so all are bounded alike.
pub(crate) fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len().min(LINE_BOUND * 4));
    let mut chars = 0;
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        for c in (chars > 0).then_some(' ').into_iter().chain(word.chars()) {
            if chars == LINE_BOUND {
                // Cut: the last character makes room for the ellipsis.
                line.pop();
                line.push('…');
                return line;
            }
            line.push(c);
            chars += 1;
        }
    }
    line
}

/// `s` with its first letter in upper case (a phrase that starts a sentence).
pub(crate) fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
