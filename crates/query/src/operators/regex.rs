//! `$regex` / `$options` and regex literals in filters, with MongoDB's engine (PCRE2,
//! `basalt_value::pattern`) and its errors.

use super::{Predicate, ValueMatch};
use basalt_error::{Error, Result};
use basalt_value::pattern::{Pattern, PatternError};
use bson::{Bson, Document};

#[derive(Clone, Debug)]
pub(crate) struct RegexPredicate {
    pattern: String,
    options: String,
    compiled: Pattern,
}

/// MongoDB's error for a pattern whose matching failed (PCRE2's match limit, say).
pub(crate) fn matching_error(code: i32, message: &str) -> Error {
    Error::location(
        51156,
        format!("Error occurred while executing the regular expression. Result code: {code} ({message})"),
    )
}

impl RegexPredicate {
    pub(crate) fn new(pattern: &str, options: &str) -> Result<RegexPredicate> {
        // As mongod: a null byte in the pattern is BadValue; one in the options is an
        // invalid flag like any other character.
        if pattern.contains('\0') {
            return Err(Error::bad_value(
                "Regular expression cannot contain an embedded null byte",
            ));
        }
        let compiled = Pattern::new(pattern, options).map_err(|e| match e {
            PatternError::BadOption(other) => {
                Error::location(51108, format!("invalid flag in regex options: {other}"))
            }
            PatternError::Invalid(reason) | PatternError::Matching(_, reason) => {
                Error::location(51091, format!("Regular expression is invalid: {reason}"))
            }
        })?;
        Ok(RegexPredicate {
            pattern: pattern.to_string(),
            options: options.to_string(),
            compiled,
        })
    }

    /// Strings and symbols match by pattern; a stored regex matches only an identical one.
    /// A match that PCRE2 could not finish (its match limit) is an error.
    pub(crate) fn test(&self, v: &Bson) -> Result<bool> {
        match v {
            Bson::String(s) | Bson::Symbol(s) => match self.compiled.is_match(s) {
                Ok(matched) => Ok(matched),
                Err(PatternError::Matching(code, message)) => Err(matching_error(code, &message)),
                Err(other) => Err(Error::internal(format!("{other:?}"))),
            },
            Bson::RegularExpression(re) => {
                Ok(re.pattern.as_str() == self.pattern && re.options.as_str() == self.options)
            }
            _ => Ok(false),
        }
    }

    /// As [`RegexPredicate::test`], a failed match counting as no match (for
    /// `$jsonSchema`'s `pattern`, which has no way to report one).
    pub(crate) fn matches(&self, v: &Bson) -> bool {
        self.test(v).unwrap_or(false)
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
                        51075,
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
