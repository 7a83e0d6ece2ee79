//! MongoDB's regular expressions: PCRE2 (as mongod since 6.1), in UTF-8 mode (without
//! Unicode properties for `\w`, `\d`, `\s`, `\b`, as mongod), patterns up to 16 KiB, and
//! MongoDB's option letters.
//!
//! Every place that evaluates a pattern (`$regex` and regex values in filters, `$in`
//! with regexes, `$regexMatch`/`$regexFind`/`$regexFindAll`, listing filters) compiles
//! it here, so look-around, back-references, possessive quantifiers, `\Q…\E`, inline
//! flags and `\p{…}` behave as in MongoDB, and the errors carry PCRE2's own messages.
//! A match's cost is bounded by PCRE2's match limit (10 million steps of its matcher),
//! so a catastrophic pattern ends in an error instead of stalling a thread; the
//! command's `maxTimeMS` is checked between documents as for any scan. Patterns are
//! JIT-compiled where the platform supports it.

use pcre2::bytes::{Regex, RegexBuilder};

/// The longest pattern mongod compiles (its PCRE2 `max_pattern_length`), in bytes.
pub const MAX_PATTERN_BYTES: usize = 16 * 1024;

/// A compiled pattern with the options it was given.
#[derive(Clone, Debug)]
pub struct Pattern {
    compiled: Regex,
}

/// Why a pattern could not be compiled or run: PCRE2's message, for the caller's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternError {
    /// An option letter MongoDB does not know.
    BadOption(char),
    /// The pattern does not compile.
    Invalid(String),
    /// Matching failed (PCRE2's match limit, say): its negative result code and message.
    Matching(i32, String),
}

/// One match: the whole of it and each group, as byte ranges of the subject.
pub struct Captures {
    groups: Vec<Option<(usize, usize)>>,
}

impl Captures {
    /// The whole match.
    pub fn whole(&self) -> (usize, usize) {
        self.groups[0].unwrap_or((0, 0))
    }

    /// The groups after the whole match (`None` for one that did not take part).
    pub fn groups(&self) -> &[Option<(usize, usize)>] {
        &self.groups[1..]
    }
}

impl Pattern {
    /// Compiles `pattern` with MongoDB's `options` (`i` caseless, `m` multi-line, `s`
    /// dot-all, `x` extended, `u` accepted: the subject is always UTF-8).
    pub fn new(pattern: &str, options: &str) -> Result<Pattern, PatternError> {
        let mut builder = RegexBuilder::new();
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(PatternError::Invalid(
                "pattern string is longer than the limit set by the application".into(),
            ));
        }
        // UTF-8 mode but, as mongod, no Unicode properties for \w, \d, \s and \b: they
        // stay ASCII (a pattern may ask for them with `(*UCP)`).
        builder.utf(true).jit_if_available(true);
        for option in options.chars() {
            match option {
                'i' => builder.caseless(true),
                'm' => builder.multi_line(true),
                's' => builder.dotall(true),
                'x' => builder.extended(true),
                'u' => &mut builder,
                other => return Err(PatternError::BadOption(other)),
            };
        }
        let compiled = builder
            .build(pattern)
            .map_err(|e| PatternError::Invalid(message(&e)))?;
        Ok(Pattern { compiled })
    }

    /// Whether the pattern matches somewhere in `subject`.
    pub fn is_match(&self, subject: &str) -> Result<bool, PatternError> {
        self.compiled.is_match(subject.as_bytes()).map_err(matching)
    }

    /// The first match at or after byte `start`.
    pub fn captures_at(
        &self,
        subject: &str,
        start: usize,
    ) -> Result<Option<Captures>, PatternError> {
        let mut locations = self.compiled.capture_locations();
        let found = self
            .compiled
            .captures_read_at(&mut locations, subject.as_bytes(), start)
            .map_err(matching)?;
        Ok(found.map(|_| Captures {
            groups: (0..locations.len()).map(|i| locations.get(i)).collect(),
        }))
    }
}

fn matching(e: pcre2::Error) -> PatternError {
    PatternError::Matching(e.code(), message(&e))
}

/// PCRE2's own words for an error, as MongoDB quotes them (without the crate's
/// "PCRE2: error compiling pattern at offset N" preamble).
fn message(e: &pcre2::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(": ") {
        Some((_, message)) => message.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, options: &str, subject: &str) -> bool {
        Pattern::new(pattern, options)
            .unwrap()
            .is_match(subject)
            .unwrap()
    }

    #[test]
    fn pcre2_features_mongodb_users_rely_on() {
        assert!(matches("^(?!tmp)", "", "data"));
        assert!(!matches("^(?!tmp)", "", "tmpfile"));
        assert!(matches("(?<=\\$)\\d+", "", "cost $42"));
        assert!(matches("^(a)b\\1$", "", "aba"));
        assert!(!matches("^a++a", "", "aaa"));
        assert!(matches("\\Qa.b\\E", "", "xa.by"));
        assert!(!matches("\\Qa.b\\E", "", "axb"));
        assert!(matches("(?i)straße", "", "STRASSE") || matches("(?i)straße", "", "STRAßE"));
        assert!(matches("^\\p{Lu}", "", "Ärger"));
        // \w, \d, \s stay ASCII unless the pattern asks for Unicode properties.
        assert!(!matches("^\\w+$", "", "café"));
        assert!(!matches("\\s", "", "\u{a0}"));
        assert!(matches("(*UCP)^\\w+$", "", "café"));
        assert!(matches("^é.$", "", "éa"));
        assert!(matches("ab", "i", "AB"));
        assert!(matches("^b", "m", "a\nb"));
        assert!(matches("a.b", "s", "a\nb"));
        assert!(matches("a b # comment", "x", "ab"));
    }

    #[test]
    fn errors_carry_pcre2s_message() {
        match Pattern::new("(", "") {
            Err(PatternError::Invalid(message)) => {
                assert!(message.contains("missing closing parenthesis"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Pattern::new("a", "g").unwrap_err(),
            PatternError::BadOption('g')
        );
    }

    #[test]
    fn a_catastrophic_pattern_ends_in_an_error() {
        let pattern = Pattern::new("^(a|aa)+$", "").unwrap();
        let subject = format!("{}b", "a".repeat(60));
        let started = std::time::Instant::now();
        match pattern.is_match(&subject) {
            Err(PatternError::Matching(code, _)) => assert!(code < 0),
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn captures_are_byte_ranges() {
        let pattern = Pattern::new("(b)(x)?", "").unwrap();
        let found = pattern.captures_at("abc", 0).unwrap().unwrap();
        assert_eq!(found.whole(), (1, 2));
        assert_eq!(found.groups(), &[Some((1, 2)), None]);
        assert!(pattern.captures_at("abc", 2).unwrap().is_none());
    }
}
