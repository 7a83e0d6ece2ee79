//! MongoDB's collations: the `collation` document of queries, sorts, indexes and
//! collections, and the locale-aware string order it stands for.
//!
//! MongoDB compares strings under a collation with ICU; Basalt uses ICU4X's collator
//! (`icu_collator`, pure Rust, with CLDR's compiled data for every locale MongoDB lists), so
//! strength, `caseLevel`, `caseFirst`, `numericOrdering`, `alternate` and `maxVariable` mean
//! what they mean in MongoDB. The locale `"simple"` is no collation at all (binary order).
//!
//! Where ICU4X and MongoDB's ICU part ways:
//! - `backwards` (French secondary order) cannot be set in ICU4X, only come with a locale's
//!   data. It is honoured between `fr` and `fr_CA`, which differ in nothing else; for other
//!   locales `backwards: true` is reported but accents still compare front to back.
//! - `normalization` is always on in ICU4X. ICU with it off gives the same order for text in
//!   FCD form (nearly all text); it differs only on unnormalized combining sequences.
//! - The `@collation=search` variants are not in ICU4X's data; they fall back to the
//!   locale's standard order.
//! - CLDR's data is newer than the ICU 57.1 that MongoDB 7.0 reports as `version`, so a few
//!   rare characters may sort differently.

use crate::display::value_to_string;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{Collator, CollatorBorrowed, CollatorPreferences};
use icu_locale_core::Locale;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// The ICU version MongoDB 7.0 reports in a collation's `version`; a spec asking for
/// another one is refused, as MongoDB refuses it.
pub const ICU_VERSION: &str = "57.1";

/// The locale that means binary comparison.
const SIMPLE: &str = "simple";

/// The locales MongoDB accepts, as ICU locale ids (`language[_Script][_REGION][_VARIANT]`).
const LOCALES: &[&str] = &[
    "af",
    "am",
    "ar",
    "as",
    "az",
    "be",
    "bg",
    "bn",
    "bo",
    "bs",
    "bs_Cyrl",
    "ca",
    "chr",
    "cs",
    "cy",
    "da",
    "de",
    "de_AT",
    "dsb",
    "dz",
    "ee",
    "el",
    "en",
    "en_US",
    "en_US_POSIX",
    "eo",
    "es",
    "et",
    "fa",
    "fa_AF",
    "fi",
    "fil",
    "fo",
    "fr",
    "fr_CA",
    "ga",
    "gl",
    "gu",
    "ha",
    "haw",
    "he",
    "hi",
    "hr",
    "hsb",
    "hu",
    "hy",
    "id",
    "ig",
    "is",
    "it",
    "ja",
    "ka",
    "kk",
    "kl",
    "km",
    "kn",
    "ko",
    "kok",
    "ky",
    "lb",
    "lkt",
    "ln",
    "lo",
    "lt",
    "lv",
    "mk",
    "ml",
    "mn",
    "mr",
    "ms",
    "mt",
    "my",
    "nb",
    "ne",
    "nl",
    "nn",
    "om",
    "or",
    "pa",
    "pl",
    "ps",
    "pt",
    "ro",
    "ru",
    "se",
    "si",
    "sk",
    "sl",
    "smn",
    "sq",
    "sr",
    "sr_Latn",
    "sv",
    "sw",
    "ta",
    "te",
    "th",
    "to",
    "tr",
    "ug",
    "uk",
    "ur",
    "vi",
    "wae",
    "yi",
    "yo",
    "zh",
    "zh_Hant",
    "zu",
];

/// The `@collation=` variants MongoDB documents, by locale.
const VARIANTS: &[(&str, &[&str])] = &[
    ("ar", &["compat"]),
    ("az", &["search"]),
    ("bn", &["traditional"]),
    ("bs", &["search"]),
    ("ca", &["search"]),
    ("cs", &["search"]),
    ("da", &["search"]),
    ("de", &["eor", "phonebook", "search"]),
    ("de_AT", &["phonebook"]),
    ("es", &["search", "traditional"]),
    ("fi", &["search", "traditional"]),
    ("gl", &["search"]),
    ("hr", &["search"]),
    ("is", &["search"]),
    ("ja", &["unihan"]),
    ("kl", &["search"]),
    ("ko", &["search", "searchjl", "unihan"]),
    ("ln", &["phonetic"]),
    ("nb", &["search"]),
    ("nn", &["search"]),
    ("pl", &["search"]),
    ("se", &["search"]),
    ("si", &["dictionary"]),
    ("sk", &["search"]),
    ("sv", &["search"]),
    ("tr", &["search"]),
    ("vi", &["traditional"]),
    ("zh", &["big5han", "gb2312han", "unihan", "zhuyin"]),
];

/// A parsed collation other than `"simple"`: cheap to clone, safe to share across threads.
#[derive(Clone)]
pub struct Collation(Arc<Parsed>);

struct Parsed {
    spec: Document,
    collator: CollatorBorrowed<'static>,
}

impl Collation {
    /// Parses a `collation` document with MongoDB's checks and errors; `None` for
    /// `{locale: "simple"}`, which is binary comparison.
    pub fn parse(spec: &Document) -> Result<Option<Collation>> {
        let fields = Fields::parse(spec)?;
        let Some(locale) = fields.locale else {
            return Err(Error::location(
                40414,
                "BSON field 'collation.locale' is missing but a required field",
            ));
        };
        if locale.contains('\0') {
            return Err(Error::bad_value(format!(
                "Field 'locale' cannot contain null byte. Collation spec: {}",
                quote(spec)
            )));
        }
        if locale == SIMPLE {
            return Ok(None);
        }
        if locale.is_empty() {
            return Err(Error::bad_value(format!(
                "Field 'locale' cannot be the empty string in: {}",
                quote(spec)
            )));
        }
        let icu_locale =
            icu_locale(locale, fields.backwards).ok_or_else(|| invalid_locale(locale, spec))?;
        let strength = match fields.strength {
            Some(n) => Some(strength_from_number(n)?),
            None => None,
        };

        if let Some(version) = fields.version {
            if version != ICU_VERSION {
                return Err(Error::new(
                    ErrorCode::INCOMPATIBLE_COLLATION_VERSION,
                    format!(
                        "Requested collation version {version} but the only available collator \
                         version was {ICU_VERSION}. Requested collation spec: {}",
                        quote(spec)
                    ),
                ));
            }
        }
        let mut preferences = CollatorPreferences::from(&icu_locale);
        preferences.case_first = fields.case_first;
        preferences.numeric_ordering = fields.numeric_ordering.map(|on| {
            if on {
                CollationNumericOrdering::True
            } else {
                CollationNumericOrdering::False
            }
        });
        let mut options = CollatorOptions::default();
        options.strength = strength;
        options.case_level = fields
            .case_level
            .map(|on| if on { CaseLevel::On } else { CaseLevel::Off });
        options.alternate_handling = fields.alternate;
        options.max_variable = fields.max_variable;
        let collator = Collator::try_new(preferences, options).map_err(|e| {
            Error::new(
                ErrorCode::OPERATION_FAILED,
                format!(
                    "Failed to create collator: {e}. Collation spec: {}",
                    quote(spec)
                ),
            )
        })?;

        let resolved = collator.resolved_options();
        let strength = strength_number(resolved.strength);
        let case_level = resolved.case_level == CaseLevel::On;
        let case_first = match resolved.case_first {
            CollationCaseFirst::Upper => "upper",
            CollationCaseFirst::Lower => "lower",
            _ => "off",
        };
        let backwards = fields.backwards.unwrap_or(locale == "fr_CA");
        if backwards && strength == 1 {
            return Err(Error::bad_value(format!(
                "'backwards' is invalid with 'strength' of 1 in: {}",
                quote(spec)
            )));
        }
        if case_first != "off" && !case_level && strength <= 2 {
            return Err(Error::bad_value(format!(
                "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater than \
                 2 in: {}",
                quote(spec)
            )));
        }
        let spec = doc! {
            "locale": locale,
            "caseLevel": case_level,
            "caseFirst": case_first,
            "strength": strength,
            "numericOrdering": resolved.numeric == CollationNumericOrdering::True,
            "alternate": match resolved.alternate_handling {
                AlternateHandling::Shifted => "shifted",
                _ => "non-ignorable",
            },
            "maxVariable": match resolved.max_variable {
                MaxVariable::Space => "space",
                _ => "punct",
            },
            "normalization": fields.normalization.unwrap_or(false),
            "backwards": backwards,
            "version": ICU_VERSION,
        };
        Ok(Some(Collation(Arc::new(Parsed { spec, collator }))))
    }

    /// The collation with every option filled in, as MongoDB reports it (in
    /// `listCollections`, `listIndexes` and `explain`).
    pub fn spec(&self) -> &Document {
        &self.0.spec
    }

    /// Compares two strings under the collation.
    pub fn compare(&self, a: &str, b: &str) -> Ordering {
        self.0.collator.compare(a, b)
    }

    /// Appends the string's collation key: keys compare bytewise as their strings compare
    /// under the collation, and are equal exactly when the strings are. What index keys
    /// and hash-based grouping use in place of the string.
    pub fn write_sort_key(&self, s: &str, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail.
        let _ = self.0.collator.write_sort_key_to(s, out);
    }
}

impl PartialEq for Collation {
    fn eq(&self, other: &Collation) -> bool {
        self.0.spec == other.0.spec
    }
}

impl fmt::Debug for Collation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Collation({})", quote(&self.0.spec))
    }
}

/// The fields of a collation document, type-checked as MongoDB's IDL parser checks them. A
/// null value stands for the field's default.
#[derive(Default)]
struct Fields<'a> {
    locale: Option<&'a str>,
    case_level: Option<bool>,
    case_first: Option<CollationCaseFirst>,
    strength: Option<i64>,
    numeric_ordering: Option<bool>,
    alternate: Option<AlternateHandling>,
    max_variable: Option<MaxVariable>,
    normalization: Option<bool>,
    backwards: Option<bool>,
    version: Option<&'a str>,
}

impl<'a> Fields<'a> {
    fn parse(spec: &'a Document) -> Result<Fields<'a>> {
        let mut fields = Fields::default();
        for (name, value) in spec {
            let null = matches!(value, Bson::Null | Bson::Undefined);
            match name.as_str() {
                "locale" => fields.locale = string_field(name, value)?,
                "version" => fields.version = string_field(name, value)?,
                "caseLevel" => fields.case_level = Some(bool_field(name, value)?),
                "numericOrdering" => fields.numeric_ordering = Some(bool_field(name, value)?),
                "normalization" => fields.normalization = Some(bool_field(name, value)?),
                // Unlike the other flags, a null `backwards` is refused.
                "backwards" if null => return Err(wrong_type(name, value, " 'bool'")),
                "backwards" => fields.backwards = Some(bool_field(name, value)?),
                "strength" if null => fields.strength = Some(3),
                "strength" => fields.strength = Some(strength_field(value)?),
                "caseFirst" => {
                    fields.case_first = Some(match enum_field(name, value, "off")? {
                        "upper" => CollationCaseFirst::Upper,
                        "lower" => CollationCaseFirst::Lower,
                        "off" => CollationCaseFirst::False,
                        other => return Err(bad_enum(name, other)),
                    })
                }
                "alternate" => {
                    fields.alternate = Some(match enum_field(name, value, "non-ignorable")? {
                        "non-ignorable" => AlternateHandling::NonIgnorable,
                        "shifted" => AlternateHandling::Shifted,
                        other => return Err(bad_enum(name, other)),
                    })
                }
                "maxVariable" => {
                    fields.max_variable = Some(match enum_field(name, value, "punct")? {
                        "punct" => MaxVariable::Punctuation,
                        "space" => MaxVariable::Space,
                        other => return Err(bad_enum(name, other)),
                    })
                }
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field 'collation.{name}' is an unknown field."),
                    ))
                }
            }
        }
        Ok(fields)
    }
}

fn wrong_type(name: &str, value: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field 'collation.{name}' is the wrong type '{}', expected type{expected}",
        crate::display::type_name(value)
    ))
}

fn string_field<'a>(name: &str, value: &'a Bson) -> Result<Option<&'a str>> {
    match value {
        Bson::String(s) => Ok(Some(s)),
        Bson::Null | Bson::Undefined => Ok(None),
        other => Err(wrong_type(name, other, " 'string'")),
    }
}

/// A bool field; null means false, its default.
fn bool_field(name: &str, value: &Bson) -> Result<bool> {
    match value {
        Bson::Boolean(b) => Ok(*b),
        Bson::Null | Bson::Undefined => Ok(false),
        other => Err(wrong_type(name, other, " 'bool'")),
    }
}

/// The string of an enumerated field; null means `default`.
fn enum_field<'a>(name: &str, value: &'a Bson, default: &'static str) -> Result<&'a str> {
    Ok(string_field(name, value)?.unwrap_or(default))
}

fn bad_enum(name: &str, value: &str) -> Error {
    Error::bad_value(format!(
        "Enumeration value '{value}' for field 'collation.{name}' is not a valid value."
    ))
}

/// `strength` accepts any number in int range, truncated, and must be within 0..=5.
fn strength_field(value: &Bson) -> Result<i64> {
    let number = match value {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            crate::as_f64(value).unwrap_or(f64::NAN)
        }
        other => {
            return Err(wrong_type(
                "strength",
                other,
                "s '[long, int, decimal, double]'",
            ))
        }
    };
    // As mongod 8.0: NaN is 0, fractions round half to even and doubles saturate at
    // the int32 bounds; out of range is BadValue.
    let n = if number.is_nan() {
        0
    } else {
        number
            .round_ties_even()
            .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i64
    };
    let (op, bound) = match n {
        n if n < 0 => (">=", 0),
        n if n > 5 => ("<=", 5),
        n => return Ok(n),
    };
    Err(Error::bad_value(format!(
        "BSON field 'collation.strength' value must be {op} {bound}, actual value '{n}'"
    )))
}

fn strength_from_number(n: i64) -> Result<Strength> {
    Ok(match n {
        1 => Strength::Primary,
        2 => Strength::Secondary,
        3 => Strength::Tertiary,
        4 => Strength::Quaternary,
        5 => Strength::Identical,
        _ => {
            return Err(Error::bad_value(format!(
                "Enumeration value '{n}' for field 'collation.strength' is not a valid value."
            )))
        }
    })
}

fn strength_number(strength: Strength) -> i32 {
    match strength {
        Strength::Primary => 1,
        Strength::Secondary => 2,
        Strength::Tertiary => 3,
        Strength::Quaternary => 4,
        _ => 5,
    }
}

/// The ICU4X locale for a MongoDB (ICU) locale id, or `None` if MongoDB does not support
/// it. `backwards` picks between `fr` and `fr_CA`, whose data differ only in that.
fn icu_locale(id: &str, backwards: Option<bool>) -> Option<Locale> {
    let (base, variant) = match id.split_once('@') {
        Some((base, keyword)) => (base, Some(keyword.strip_prefix("collation=")?)),
        None => (id, None),
    };
    if !LOCALES.contains(&base) {
        return None;
    }
    let base = match (base, variant, backwards) {
        ("fr", None, Some(true)) => "fr_CA",
        ("fr_CA", None, Some(false)) => "fr",
        _ => base,
    };
    let mut tag = base.replace('_', "-");
    if let Some(variant) = variant {
        let (_, supported) = VARIANTS.iter().find(|(locale, _)| *locale == base)?;
        if !supported.contains(&variant) {
            return None;
        }
        // BCP 47 spells some of ICU's collation types shorter.
        let co = match variant {
            "dictionary" => "dict",
            "gb2312han" => "gb2312",
            "phonebook" => "phonebk",
            "traditional" => "trad",
            other => other,
        };
        tag.push_str("-u-co-");
        tag.push_str(co);
    }
    tag.parse().ok()
}

/// MongoDB's error for an unknown locale, suggesting the nearest supported one as ICU's
/// fallback would ("fr_FR" → "fr").
fn invalid_locale(locale: &str, spec: &Document) -> Error {
    let base = locale.split('@').next().unwrap_or(locale);
    let suggestion = std::iter::successors(Some(base), |l| l.rsplit_once('_').map(|(p, _)| p))
        .find(|candidate| LOCALES.contains(candidate) && *candidate != locale);
    let mut message = format!("Field 'locale' is invalid in: {}", quote(spec));
    if let Some(suggestion) = suggestion {
        message.push_str(&format!(". Did you mean '{suggestion}'?"));
    }
    Error::bad_value(message)
}

/// A document as MongoDB quotes it in messages: `{ locale: "en", strength: 1 }`.
fn quote(spec: &Document) -> String {
    value_to_string(&Bson::Document(spec.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn collation(spec: Document) -> Collation {
        Collation::parse(&spec).unwrap().unwrap()
    }

    fn error(spec: Document) -> Error {
        Collation::parse(&spec).unwrap_err()
    }

    #[test]
    fn simple_is_binary() {
        assert!(Collation::parse(&doc! {"locale": "simple"})
            .unwrap()
            .is_none());
    }

    #[test]
    fn strength_levels() {
        let base = collation(doc! {"locale": "en_US", "strength": 1});
        assert_eq!(base.compare("Café", "cafe"), Ordering::Equal);
        assert_eq!(base.compare("cafe", "cafes"), Ordering::Less);
        let accents = collation(doc! {"locale": "en_US", "strength": 2});
        assert_eq!(accents.compare("PING", "ping"), Ordering::Equal);
        assert_eq!(accents.compare("cafe", "café"), Ordering::Less);
        let case = collation(doc! {"locale": "en_US", "strength": 3});
        assert_eq!(case.compare("ping", "PING"), Ordering::Less);
        assert_eq!(case.compare("a", "B"), Ordering::Less);
        let case_level = collation(doc! {"locale": "en", "strength": 1, "caseLevel": true});
        assert_eq!(case_level.compare("Cafe", "café"), Ordering::Greater);
        assert_eq!(case_level.compare("cafe", "café"), Ordering::Equal);
    }

    #[test]
    fn options() {
        let upper = collation(doc! {"locale": "en", "caseFirst": "upper"});
        assert_eq!(upper.compare("A", "a"), Ordering::Less);
        let lower = collation(doc! {"locale": "en", "caseFirst": "lower"});
        assert_eq!(lower.compare("A", "a"), Ordering::Greater);
        let numeric = collation(doc! {"locale": "en", "numericOrdering": true});
        assert_eq!(numeric.compare("10", "9"), Ordering::Greater);
        assert_eq!(
            collation(doc! {"locale": "en"}).compare("10", "9"),
            Ordering::Less
        );
        // Shifted punctuation and spaces only count at the fourth level.
        assert_ne!(
            collation(doc! {"locale": "en"}).compare("a-b", "ab"),
            Ordering::Equal
        );
        let shifted = collation(doc! {"locale": "en", "alternate": "shifted"});
        assert_eq!(shifted.compare("a-b", "ab"), Ordering::Equal);
        assert_eq!(shifted.compare("a b", "ab"), Ordering::Equal);
        let fourth = collation(doc! {"locale": "en", "alternate": "shifted", "strength": 4});
        assert_ne!(fourth.compare("a-b", "ab"), Ordering::Equal);
        let spaces =
            collation(doc! {"locale": "en", "alternate": "shifted", "maxVariable": "space"});
        assert_eq!(spaces.compare("a b", "ab"), Ordering::Equal);
        assert_ne!(spaces.compare("a-b", "ab"), Ordering::Equal);
    }

    #[test]
    fn locales_and_variants() {
        // ASCII order: uppercase first.
        let posix = collation(doc! {"locale": "en_US_POSIX"});
        assert_eq!(posix.compare("a", "B"), Ordering::Greater);
        // Danish sorts å after z; the root order puts it with a.
        assert_eq!(
            collation(doc! {"locale": "da"}).compare("å", "z"),
            Ordering::Greater
        );
        assert_eq!(
            collation(doc! {"locale": "en"}).compare("å", "z"),
            Ordering::Less
        );
        // German phonebook order reads ä as "ae".
        let phonebook = collation(doc! {"locale": "de@collation=phonebook"});
        assert_eq!(phonebook.compare("ä", "ad"), Ordering::Greater);
        assert_eq!(
            collation(doc! {"locale": "de"}).compare("ä", "ad"),
            Ordering::Less
        );
        assert!(Collation::parse(&doc! {"locale": "ko@collation=search"}).is_ok());
        assert!(Collation::parse(&doc! {"locale": "zh_Hant"}).is_ok());
    }

    #[test]
    fn backwards_secondary_order() {
        let words = ["cote", "côte", "coté", "côté"];
        let sorted = |c: &Collation| {
            let mut w = words.to_vec();
            w.sort_by(|a, b| c.compare(a, b));
            w
        };
        let french = collation(doc! {"locale": "fr"});
        assert_eq!(sorted(&french), ["cote", "coté", "côte", "côté"]);
        let canadian = collation(doc! {"locale": "fr_CA"});
        assert_eq!(sorted(&canadian), ["cote", "côte", "coté", "côté"]);
        assert_eq!(
            sorted(&collation(doc! {"locale": "fr", "backwards": true})),
            sorted(&canadian)
        );
        assert_eq!(
            sorted(&collation(doc! {"locale": "fr_CA", "backwards": false})),
            sorted(&french)
        );
    }

    #[test]
    fn resolved_spec() {
        assert_eq!(
            collation(doc! {"locale": "en_US", "strength": 2}).spec(),
            &doc! {
                "locale": "en_US",
                "caseLevel": false,
                "caseFirst": "off",
                "strength": 2,
                "numericOrdering": false,
                "alternate": "non-ignorable",
                "maxVariable": "punct",
                "normalization": false,
                "backwards": false,
                "version": "57.1",
            }
        );
        // Locale defaults: Danish puts uppercase first, Thai ignores punctuation, Canadian
        // French reads accents backwards.
        let spec = |locale: &str| collation(doc! {"locale": locale}).spec().clone();
        assert_eq!(spec("da").get_str("caseFirst").unwrap(), "upper");
        assert_eq!(spec("th").get_str("alternate").unwrap(), "shifted");
        assert!(spec("fr_CA").get_bool("backwards").unwrap());
        assert_eq!(spec("en").get_i32("strength").unwrap(), 3);
        // Numbers of any type are accepted for strength, and null means the default.
        assert_eq!(
            collation(doc! {"locale": "en", "strength": 1.0}).spec(),
            collation(doc! {"locale": "en", "strength": 1i64}).spec()
        );
        assert_eq!(
            collation(doc! {"locale": "en", "strength": Bson::Null}).spec(),
            collation(doc! {"locale": "en"}).spec()
        );
        assert_eq!(
            collation(doc! {"locale": "en", "version": "57.1"}),
            collation(doc! {"locale": "en"})
        );
    }

    #[test]
    fn errors() {
        let e = error(doc! {"strength": 2});
        assert_eq!(e.code.0, 40414);
        assert_eq!(
            e.message,
            "BSON field 'collation.locale' is missing but a required field"
        );
        let e = error(doc! {"locale": "xx"});
        assert_eq!(e.code, ErrorCode::BAD_VALUE);
        assert_eq!(
            e.message,
            "Field 'locale' is invalid in: { locale: \"xx\" }"
        );
        assert_eq!(
            error(doc! {"locale": "fr_FR"}).message,
            "Field 'locale' is invalid in: { locale: \"fr_FR\" }. Did you mean 'fr'?"
        );
        assert_eq!(error(doc! {"locale": "en-US"}).code, ErrorCode::BAD_VALUE);
        assert_eq!(
            error(doc! {"locale": "en@collation=phonebook"}).code,
            ErrorCode::BAD_VALUE
        );
        assert_eq!(
            error(doc! {"locale": ""}).message,
            "Field 'locale' cannot be the empty string in: { locale: \"\" }"
        );
        let e = error(doc! {"locale": "en", "strength": 6});
        assert_eq!(e.code.0, 2);
        assert_eq!(
            e.message,
            "BSON field 'collation.strength' value must be <= 5, actual value '6'"
        );
        let e = error(doc! {"locale": "en", "strength": 0});
        assert_eq!(e.code, ErrorCode::BAD_VALUE);
        assert_eq!(
            e.message,
            "Enumeration value '0' for field 'collation.strength' is not a valid value."
        );
        assert_eq!(
            error(doc! {"locale": "en", "strength": "2"}).code,
            ErrorCode::TYPE_MISMATCH
        );
        let e = error(doc! {"locale": 1});
        assert_eq!(e.code, ErrorCode::TYPE_MISMATCH);
        assert_eq!(
            e.message,
            "BSON field 'collation.locale' is the wrong type 'int', expected type 'string'"
        );
        assert_eq!(
            error(doc! {"locale": "en", "caseLevel": 1}).code,
            ErrorCode::TYPE_MISMATCH
        );
        assert_eq!(
            error(doc! {"locale": "en", "caseFirst": "first"}).message,
            "Enumeration value 'first' for field 'collation.caseFirst' is not a valid value."
        );
        assert_eq!(
            error(doc! {"locale": "en", "alternate": "x"}).code,
            ErrorCode::BAD_VALUE
        );
        assert_eq!(
            error(doc! {"locale": "en", "maxVariable": "x"}).code,
            ErrorCode::BAD_VALUE
        );
        let e = error(doc! {"locale": "en", "colour": 1});
        assert_eq!(e.code.0, 40415);
        assert_eq!(
            e.message,
            "BSON field 'collation.colour' is an unknown field."
        );
        assert_eq!(
            error(doc! {"locale": "en", "strength": 1, "backwards": true}).message,
            "'backwards' is invalid with 'strength' of 1 in: { locale: \"en\", strength: 1, \
             backwards: true }"
        );
        assert_eq!(
            error(doc! {"locale": "en", "strength": 2, "caseFirst": "upper"}).message,
            "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater than 2 \
             in: { locale: \"en\", strength: 2, caseFirst: \"upper\" }"
        );
        assert!(Collation::parse(
            &doc! {"locale": "en", "strength": 2, "caseFirst": "upper", "caseLevel": true}
        )
        .is_ok());
        let e = error(doc! {"locale": "en", "version": "1.0"});
        assert_eq!(e.code, ErrorCode::INCOMPATIBLE_COLLATION_VERSION);
        assert!(e.message.starts_with(
            "Requested collation version 1.0 but the only available collator version was 57.1."
        ));
        // MongoDB ignores the other fields of a simple collation.
        assert!(Collation::parse(&doc! {"locale": "simple", "strength": 2})
            .unwrap()
            .is_none());
    }

    proptest! {
        #[test]
        fn sort_keys_order_like_compare(
            a in "[aAbBéÉ 1-9-]{0,5}",
            b in "[aAbBéÉ 1-9-]{0,5}",
            strength in 1i32..=5,
            numeric in any::<bool>(),
        ) {
            let c = collation(doc! {
                "locale": "en", "strength": strength, "numericOrdering": numeric,
            });
            let key = |s: &str| {
                let mut out = Vec::new();
                c.write_sort_key(s, &mut out);
                out
            };
            prop_assert_eq!(key(&a).cmp(&key(&b)), c.compare(&a, &b));
        }
    }
}
