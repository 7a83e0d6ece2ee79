//! `$regex` / `$options` and regex literals in filters.
//!
//! MongoDB uses PCRE; Basalt uses the `regex` crate, which covers the same syntax except
//! look-around and backreferences (patterns using them are rejected as invalid rather than
//! silently matching differently). The flags `i`, `m`, `s` and `x` map to the crate's
//! inline flags; `u` is accepted and has no effect because matching is always Unicode-aware.

use super::{Predicate, ValueMatch};
use basalt_error::{Error, Result};
use bson::{Bson, Document};

#[derive(Clone, Debug)]
pub(crate) struct RegexPredicate {
    pattern: String,
    options: String,
    compiled: regex::Regex,
}

impl RegexPredicate {
    pub(crate) fn new(pattern: &str, options: &str) -> Result<RegexPredicate> {
        if pattern.contains('\0') {
            return Err(Error::location(
                51109,
                "Regular expression cannot contain an embedded null byte",
            ));
        }
        if options.contains('\0') {
            return Err(Error::location(
                51110,
                "Regular expression options string cannot contain an embedded null byte",
            ));
        }
        let mut inline = String::new();
        for flag in options.chars() {
            match flag {
                'i' | 'm' | 's' | 'x' => {
                    if !inline.contains(flag) {
                        inline.push(flag);
                    }
                }
                'u' => {}
                other => {
                    return Err(Error::location(
                        51108,
                        format!("invalid flag in regex options: {other}"),
                    ))
                }
            }
        }
        let source = if inline.is_empty() {
            pattern.to_string()
        } else {
            format!("(?{inline}){pattern}")
        };
        let compiled = regex::Regex::new(&source).map_err(|e| {
            let reason = e.to_string();
            let last_line = reason.lines().last().unwrap_or_default().trim().to_string();
            Error::location(51091, format!("Regular expression is invalid: {last_line}"))
        })?;
        Ok(RegexPredicate {
            pattern: pattern.to_string(),
            options: options.to_string(),
            compiled,
        })
    }

    /// Strings and symbols match by pattern; a stored regex matches only an identical one.
    pub(crate) fn matches(&self, v: &Bson) -> bool {
        match v {
            Bson::String(s) | Bson::Symbol(s) => self.compiled.is_match(s),
            Bson::RegularExpression(re) => {
                re.pattern.as_str() == self.pattern && re.options.as_str() == self.options
            }
            _ => false,
        }
    }
}

/// Parses `$regex` together with a sibling `$options` from the operator document.
pub(super) fn parse_regex_operator(ops: &Document) -> Result<ValueMatch> {
    let mut options = "";
    if let Some(value) = ops.get("$options") {
        let Bson::String(s) = value else {
            return Err(Error::bad_value("$options has to be a string"));
        };
        options = s;
    }
    let pattern = match ops.get("$regex") {
        Some(Bson::String(s)) => s.as_str(),
        Some(Bson::RegularExpression(re)) => {
            if !re.options.as_str().is_empty() {
                if !options.is_empty() {
                    return Err(Error::location(
                        51074,
                        "options set in both $regex and $options",
                    ));
                }
                options = re.options.as_str();
            }
            re.pattern.as_str()
        }
        _ => return Err(Error::bad_value("$regex has to be a string")),
    };
    Ok(ValueMatch::Leaf(Predicate::Regex(RegexPredicate::new(
        pattern, options,
    )?)))
}

#[cfg(test)]
mod tests {
    use crate::Matcher;
    use bson::{doc, Bson, Regex};

    fn re(pattern: &str, options: &str) -> Regex {
        Regex {
            pattern: pattern.to_string().try_into().unwrap(),
            options: options.to_string().try_into().unwrap(),
        }
    }

    fn matches(filter: bson::Document, doc: bson::Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&doc)
    }

    #[test]
    fn patterns_and_flags() {
        assert!(matches(doc! {"a": re("^ab", "")}, doc! {"a": "abc"}));
        assert!(!matches(doc! {"a": re("^AB", "")}, doc! {"a": "abc"}));
        assert!(matches(doc! {"a": re("^AB", "i")}, doc! {"a": "abc"}));
        assert!(matches(
            doc! {"a": {"$regex": "^AB", "$options": "i"}},
            doc! {"a": "abc"}
        ));
        assert!(matches(
            doc! {"a": {"$options": "i", "$regex": "^AB"}},
            doc! {"a": "abc"}
        ));
        assert!(matches(
            doc! {"a": {"$regex": re("b$", "m")}},
            doc! {"a": "ab\ncd"}
        ));
        assert!(matches(
            doc! {"a": {"$regex": "a.c", "$options": "s"}},
            doc! {"a": "a\nc"}
        ));
        assert!(matches(
            doc! {"a": {"$regex": "a b # comment", "$options": "x"}},
            doc! {"a": "ab"}
        ));
        assert!(matches(doc! {"a": re("x", "")}, doc! {"a": ["y", "x"]}));
        assert!(matches(
            doc! {"a": re("x", "")},
            doc! {"a": Bson::Symbol("x".into())}
        ));
        assert!(!matches(doc! {"a": re("1", "")}, doc! {"a": 1}));
        assert!(matches(
            doc! {"a": {"$eq": re("x", "i")}},
            doc! {"a": re("x", "i")}
        ));
        assert!(matches(doc! {"a": re("x", "i")}, doc! {"a": re("x", "i")}));
        assert!(!matches(doc! {"a": re("x", "")}, doc! {"a": re("x", "i")}));
    }

    #[test]
    fn errors() {
        let err = |f: bson::Document| Matcher::new(&f).unwrap_err();
        assert_eq!(
            err(doc! {"a": {"$regex": 1}}).message,
            "$regex has to be a string"
        );
        assert_eq!(
            err(doc! {"a": {"$options": "i"}}).message,
            "$options needs a $regex"
        );
        assert_eq!(
            err(doc! {"a": {"$regex": "x", "$options": 1}}).message,
            "$options has to be a string"
        );
        let bad_flag = err(doc! {"a": {"$regex": "x", "$options": "g"}});
        assert_eq!(bad_flag.message, "invalid flag in regex options: g");
        assert_eq!(bad_flag.code.name(), "Location51108");
        assert_eq!(
            err(doc! {"a": {"$regex": re("x", "i"), "$options": "m"}}).message,
            "options set in both $regex and $options"
        );
        assert_eq!(err(doc! {"a": {"$regex": "("}}).code.0, 51091);
    }
}
