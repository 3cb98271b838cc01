//! Glob patterns as `SCAN ... MATCH` reads them, for filtering names as the server would
//! (ACL key patterns, `top`'s pattern).

use std::collections::HashSet;

/// Whether `text` matches the glob `pattern` as `SCAN ... MATCH` matches keys: `*` any run,
/// `?` any one character, `[abc]`, `[a-z]` and `[^a]` a class, `\` escapes the next. Each
/// (pattern, text) position is tried once, so many `*`s cost no more than the positions.
pub(crate) fn glob_matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let mut failed = HashSet::new();
    matches_at(&p, &t, 0, 0, &mut failed)
}

fn matches_at(
    p: &[char],
    t: &[char],
    i: usize,
    j: usize,
    failed: &mut HashSet<(usize, usize)>,
) -> bool {
    if failed.contains(&(i, j)) {
        return false;
    }
    let matched = match p.get(i) {
        None => j == t.len(),
        Some('*') => (j..=t.len()).any(|k| matches_at(p, t, i + 1, k, failed)),
        Some('?') => j < t.len() && matches_at(p, t, i + 1, j + 1, failed),
        Some('[') => match t.get(j) {
            None => false,
            Some(&c) => {
                let (hit, next) = class(p, i, c);
                hit && matches_at(p, t, next, j + 1, failed)
            }
        },
        Some('\\') if i + 1 < p.len() => {
            t.get(j) == Some(&p[i + 1]) && matches_at(p, t, i + 2, j + 1, failed)
        }
        Some(c) => t.get(j) == Some(c) && matches_at(p, t, i + 1, j + 1, failed),
    };
    if !matched {
        failed.insert((i, j));
    }
    matched
}

/// Whether `c` is in the class that opens at `p[open]` (`[`), and where the pattern goes on
/// after it (an unclosed class ends the pattern, as Redis reads it).
fn class(p: &[char], open: usize, c: char) -> (bool, usize) {
    let mut i = open + 1;
    let negate = p.get(i) == Some(&'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    while i < p.len() && p[i] != ']' {
        if p[i] == '\\' && i + 1 < p.len() {
            i += 1;
            hit |= p[i] == c;
        } else if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            let (lo, hi) = (p[i].min(p[i + 2]), p[i].max(p[i + 2]));
            hit |= (lo..=hi).contains(&c);
            i += 2;
        } else {
            hit |= p[i] == c;
        }
        i += 1;
    }
    (hit != negate, (i + 1).min(p.len()))
}

/// `text` as a glob that matches it alone: `*`, `?`, `[`, `]` and `\` escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut glob = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            glob.push('\\');
        }
        glob.push(c);
    }
    glob
}

#[cfg(test)]
mod tests {
    use super::{escape, glob_matches};

    #[test]
    fn an_escaped_text_matches_itself_alone() {
        for text in ["{api}", "a*b?[c]\\d", "plain"] {
            let glob = escape(text);
            assert!(glob_matches(&glob, text), "{glob}");
            assert!(glob_matches(&format!("{glob}:*"), &format!("{text}:x")));
        }
        assert!(!glob_matches(&escape("a*"), "abc"));
        assert_eq!(escape("a[1]*"), "a\\[1\\]\\*");
    }

    #[test]
    fn globs_match_as_scan_does() {
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("orders:*", "orders:42"));
        assert!(!glob_matches("orders:*", "order:42"));
        assert!(glob_matches("h?llo", "hello"));
        assert!(glob_matches("h[ae]llo", "hallo"));
        assert!(!glob_matches("h[^e]llo", "hello"));
        assert!(glob_matches("h[a-b]llo", "hbllo"));
        assert!(glob_matches("a\\*b", "a*b"));
        assert!(!glob_matches("a\\*b", "axb"));
        assert!(glob_matches("cli:top", "cli:top"));
        // Many stars against a long name that does not match: quick, not exponential.
        let long = "a".repeat(200);
        assert!(!glob_matches("*a*a*a*a*a*a*a*a*a*a*b", &long));
    }
}
