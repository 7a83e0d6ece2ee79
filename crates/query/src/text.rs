//! Text search: text indexes and the `$text` operator, as MongoDB's text search version
//! 3 defines them.
//!
//! A text index names the string fields it covers (or `$**`, every string of the
//! document) with a weight each, a default language and the field a document may name
//! its own language in. A string is cut into words at every character that is not a
//! letter or digit; words are folded to lower case and stripped of diacritics, stop
//! words of the language dropped, and the rest reduced to their stems by the language's
//! Snowball stemmer (`rust-stemmers`). `$text: {$search}` holds words (any of which
//! matches: OR), `"phrases"` (each of which must appear: AND, compared as text) and
//! `-words`/`-"phrases"` that must not appear; a search of negations alone matches
//! nothing, as in MongoDB.
//!
//! A document's score for a search is MongoDB's: for each field, a term found `n` times
//! among the field's `k` words adds `weight × (1 + 1/2 + … + 1/2^(n-1)) × (n / 2k + 1/2)`
//! (× 1.1 when the whole field is that one word), summed over the search's words. The
//! score travels with a document as the field [`TEXT_SCORE_FIELD`], which
//! `{$meta: "textScore"}` reads and the server removes before replying.

use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};
use rust_stemmers::{Algorithm, Stemmer};
use std::collections::HashMap;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// The field a matched document carries its text score in, between the scan and the
/// reply (never stored, never sent).
pub use basalt_expr::TEXT_SCORE_FIELD;

/// The text index version MongoDB 3.2 and later build.
pub const TEXT_INDEX_VERSION: i32 = 3;

/// A language of text search: its stemmer and stop words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// No stemming and no stop words.
    None,
    Stemmed(Algorithm, &'static str),
}

/// The languages MongoDB's text search knows, by name and two-letter code.
const LANGUAGES: &[(&str, &str, Algorithm)] = &[
    ("danish", "da", Algorithm::Danish),
    ("dutch", "nl", Algorithm::Dutch),
    ("english", "en", Algorithm::English),
    ("finnish", "fi", Algorithm::Finnish),
    ("french", "fr", Algorithm::French),
    ("german", "de", Algorithm::German),
    ("hungarian", "hu", Algorithm::Hungarian),
    ("italian", "it", Algorithm::Italian),
    ("norwegian", "nb", Algorithm::Norwegian),
    ("portuguese", "pt", Algorithm::Portuguese),
    ("romanian", "ro", Algorithm::Romanian),
    ("russian", "ru", Algorithm::Russian),
    ("spanish", "es", Algorithm::Spanish),
    ("swedish", "sv", Algorithm::Swedish),
    ("turkish", "tr", Algorithm::Turkish),
];

/// English stop words (MongoDB's list), dropped before stemming.
const ENGLISH_STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cannot",
    "could",
    "couldn",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "let",
    "ll",
    "me",
    "more",
    "most",
    "mustn",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shan",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasn",
    "we",
    "were",
    "weren",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "with",
    "won",
    "would",
    "wouldn",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

impl Language {
    /// A text index's language unless it names another.
    pub const ENGLISH: Language = Language::Stemmed(Algorithm::English, "english");

    /// The language called `name` (MongoDB's names and two-letter codes, `none`).
    pub fn parse(name: &str) -> Option<Language> {
        let name = name.to_lowercase();
        if name == "none" {
            return Some(Language::None);
        }
        LANGUAGES
            .iter()
            .find(|(full, code, _)| *full == name || *code == name)
            .map(|(full, _, algorithm)| Language::Stemmed(*algorithm, full))
    }

    /// The name MongoDB reports for the language.
    pub fn name(self) -> &'static str {
        match self {
            Language::None => "none",
            Language::Stemmed(_, name) => name,
        }
    }

    fn is_stop_word(self, word: &str) -> bool {
        matches!(self, Language::Stemmed(Algorithm::English, _))
            && ENGLISH_STOP_WORDS.binary_search(&word).is_ok()
    }

    fn stemmer(self) -> Option<Stemmer> {
        match self {
            Language::None => None,
            Language::Stemmed(algorithm, _) => Some(Stemmer::create(algorithm)),
        }
    }
}

/// How words compare: MongoDB's defaults fold case and diacritics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sensitivity {
    case: bool,
    diacritics: bool,
}

/// `text` as comparable text: folded as `sensitivity` says.
fn normalize(text: &str, sensitivity: Sensitivity) -> String {
    let folded: String = if sensitivity.diacritics {
        text.to_string()
    } else {
        text.nfd().filter(|c| !is_combining_mark(*c)).collect()
    };
    if sensitivity.case {
        folded
    } else {
        folded.to_lowercase()
    }
}

/// The words of `text`, normalized: runs of letters and digits.
fn words(text: &str, sensitivity: Sensitivity) -> Vec<String> {
    normalize(text, sensitivity)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_string)
        .collect()
}

/// The terms of `text` in `language`: its words without stop words, stemmed.
fn terms(text: &str, language: Language, sensitivity: Sensitivity) -> Vec<String> {
    let stemmer = language.stemmer();
    words(text, sensitivity)
        .into_iter()
        .filter(|word| !language.is_stop_word(&word.to_lowercase()))
        .map(|word| match &stemmer {
            Some(stemmer) => stemmer.stem(&word).into_owned(),
            None => word,
        })
        .collect()
}

/// A text index's definition.
#[derive(Clone, Debug, PartialEq)]
pub struct TextIndex {
    /// The indexed paths with their weights; `$**` indexes every string.
    pub weights: Vec<(String, i32)>,
    pub default_language: Language,
    /// The field a document names its language in.
    pub language_override: String,
}

impl TextIndex {
    /// The strings of `doc` the index covers, with their fields' weights.
    fn strings<'d>(&self, doc: &'d Document) -> Vec<(f64, &'d str)> {
        let mut found = Vec::new();
        for (path, weight) in &self.weights {
            let weight = f64::from(*weight);
            if path == "$**" {
                strings_within(doc, weight, &mut found);
            } else {
                strings_at(doc, path, weight, &mut found);
            }
        }
        found
    }

    /// The language a document is in: its own (at the language override field), or the
    /// index's default.
    fn language_of(&self, doc: &Document) -> Language {
        doc.get_str(&self.language_override)
            .ok()
            .and_then(Language::parse)
            .unwrap_or(self.default_language)
    }

    /// The terms a document is indexed under (the keys of its index entries).
    pub fn document_terms(&self, doc: &Document) -> Vec<String> {
        let language = self.language_of(doc);
        let mut all: Vec<String> = self
            .strings(doc)
            .into_iter()
            .flat_map(|(_, text)| terms(text, language, Sensitivity::default()))
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Each term's score in `doc` (MongoDB's formula, see the module's documentation).
    fn term_scores(&self, doc: &Document, sensitivity: Sensitivity) -> HashMap<String, f64> {
        let language = self.language_of(doc);
        let mut scores = HashMap::new();
        for (weight, text) in self.strings(doc) {
            let found = terms(text, language, sensitivity);
            let mut stats: HashMap<&str, (f64, f64, f64)> = HashMap::new();
            for term in &found {
                let (frequency, count, exponent) = stats.entry(term).or_insert((0.0, 0.0, 0.0));
                *exponent = if *exponent == 0.0 {
                    1.0
                } else {
                    *exponent * 2.0
                };
                *count += 1.0;
                *frequency += 1.0 / *exponent;
            }
            let total = found.len() as f64;
            let whole = normalize(text, sensitivity);
            for (term, (frequency, count, _)) in stats {
                let coefficient = 0.5 * count / total + 0.5;
                let exact = if whole == term { 1.1 } else { 1.0 };
                *scores.entry(term.to_string()).or_insert(0.0) +=
                    weight * frequency * coefficient * exact;
            }
        }
        scores
    }
}

fn strings_at<'d>(doc: &'d Document, path: &str, weight: f64, out: &mut Vec<(f64, &'d str)>) {
    let (first, rest) = path
        .split_once('.')
        .map_or((path, None), |(f, r)| (f, Some(r)));
    let Some(value) = doc.get(first) else {
        return;
    };
    strings_of_value(value, rest, weight, out);
}

fn strings_of_value<'d>(
    value: &'d Bson,
    rest: Option<&str>,
    weight: f64,
    out: &mut Vec<(f64, &'d str)>,
) {
    match (value, rest) {
        (Bson::String(text), None) => out.push((weight, text)),
        (Bson::Array(items), _) => {
            for item in items {
                strings_of_value(item, rest, weight, out);
            }
        }
        (Bson::Document(inner), Some(rest)) => strings_at(inner, rest, weight, out),
        _ => {}
    }
}

fn strings_within<'d>(doc: &'d Document, weight: f64, out: &mut Vec<(f64, &'d str)>) {
    for value in doc.values() {
        collect_strings(value, weight, out);
    }
}

fn collect_strings<'d>(value: &'d Bson, weight: f64, out: &mut Vec<(f64, &'d str)>) {
    match value {
        Bson::String(text) => out.push((weight, text)),
        Bson::Array(items) => items
            .iter()
            .for_each(|item| collect_strings(item, weight, out)),
        Bson::Document(inner) => strings_within(inner, weight, out),
        _ => {}
    }
}

/// A parsed `$text` query.
#[derive(Clone, Debug, PartialEq)]
pub struct TextQuery {
    search: String,
    language: Option<Language>,
    sensitivity: Sensitivity,
}

/// The parts of a search string.
struct Search {
    words: Vec<String>,
    negated_words: Vec<String>,
    phrases: Vec<String>,
    negated_phrases: Vec<String>,
}

impl TextQuery {
    /// Parses `{$search, $language, $caseSensitive, $diacriticSensitive}`.
    pub fn parse(spec: &Bson) -> Result<TextQuery> {
        let Bson::Document(spec) = spec else {
            return Err(Error::bad_value("$text expects an object"));
        };
        let mut query = TextQuery {
            search: String::new(),
            language: None,
            sensitivity: Sensitivity::default(),
        };
        let mut searched = false;
        for (key, value) in spec {
            let flag = |name: &str| match value {
                Bson::Boolean(flag) => Ok(*flag),
                other => Err(Error::type_mismatch(format!(
                    "BSON field '$text.{name}' is the wrong type '{}', expected type 'bool'",
                    crate::display::type_name(other)
                ))),
            };
            match key.as_str() {
                "$search" => match value {
                    Bson::String(search) => {
                        query.search = search.clone();
                        searched = true;
                    }
                    other => {
                        return Err(Error::type_mismatch(format!(
                            "BSON field '$text.$search' is the wrong type '{}', expected type 'string'",
                            crate::display::type_name(other)
                        )))
                    }
                },
                "$language" => match value {
                    Bson::String(name) => {
                        query.language = Some(Language::parse(name).ok_or_else(|| {
                            Error::bad_value(format!(
                                "language \"{name}\" is not supported for text search"
                            ))
                        })?);
                    }
                    other => {
                        return Err(Error::type_mismatch(format!(
                            "BSON field '$text.$language' is the wrong type '{}', expected type 'string'",
                            crate::display::type_name(other)
                        )))
                    }
                },
                "$caseSensitive" => query.sensitivity.case = flag("$caseSensitive")?,
                "$diacriticSensitive" => {
                    query.sensitivity.diacritics = flag("$diacriticSensitive")?
                }
                other => {
                    return Err(Error::bad_value(format!(
                        "Unrecognized field '{other}' in $text"
                    )))
                }
            }
        }
        if !searched {
            return Err(Error::new(
                ErrorCode::NO_SUCH_KEY,
                "Missing expected field \"$search\"",
            ));
        }
        Ok(query)
    }

    /// The search string cut into words, phrases and their negations, in `language`.
    fn search(&self, language: Language) -> Search {
        let mut search = Search {
            words: Vec::new(),
            negated_words: Vec::new(),
            phrases: Vec::new(),
            negated_phrases: Vec::new(),
        };
        let mut rest = self.search.as_str();
        while !rest.is_empty() {
            let negated = rest.starts_with('-');
            let body = rest.trim_start_matches('-');
            if let Some(quoted) = body.strip_prefix('"') {
                let (phrase, after) = quoted.split_once('"').unwrap_or((quoted, ""));
                if negated {
                    search
                        .negated_phrases
                        .push(normalize(phrase, self.sensitivity));
                } else {
                    // A phrase's words are words of the search too (one of which a
                    // match must hold, as MongoDB looks matches up by them).
                    search
                        .words
                        .extend(terms(phrase, language, self.sensitivity));
                    search.phrases.push(normalize(phrase, self.sensitivity));
                }
                rest = after;
                continue;
            }
            let end = body
                .find(|c: char| c.is_whitespace() || c == '"')
                .unwrap_or(body.len());
            let (token, after) = body.split_at(end);
            let found = terms(token, language, self.sensitivity);
            if negated && !token.is_empty() {
                search.negated_words.extend(found);
            } else {
                search.words.extend(found);
            }
            rest = after.trim_start_matches(|c: char| c.is_whitespace());
            if rest.len() == body.len() {
                break;
            }
        }
        search.words.sort();
        search.words.dedup();
        search
    }

    /// The terms a document must be indexed under to match (one of them): the
    /// search's words and its phrases' words (none for phrases of stop words alone).
    pub fn index_terms(&self, index: &TextIndex) -> Vec<String> {
        // The index holds folded terms; a sensitive search filters its matches after.
        let folded = TextQuery {
            sensitivity: Sensitivity::default(),
            ..self.clone()
        };
        folded
            .search(self.language.unwrap_or(index.default_language))
            .words
    }

    /// Whether `doc` matches the search under `index`.
    pub fn matches(&self, index: &TextIndex, doc: &Document) -> bool {
        self.score(index, doc).is_some()
    }

    /// The score of `doc` for the search under `index`; `None` when it does not match.
    pub fn score(&self, index: &TextIndex, doc: &Document) -> Option<f64> {
        let language = self.language.unwrap_or(index.default_language);
        let search = self.search(language);
        if search.words.is_empty() && search.phrases.is_empty() {
            return None;
        }
        let scores = index.term_scores(doc, self.sensitivity);
        if search
            .negated_words
            .iter()
            .any(|word| scores.contains_key(word))
        {
            return None;
        }
        let texts: Vec<String> = index
            .strings(doc)
            .into_iter()
            .map(|(_, text)| normalize(text, self.sensitivity))
            .collect();
        let contains = |phrase: &String| texts.iter().any(|text| text.contains(phrase.as_str()));
        if !search.phrases.iter().all(contains) || search.negated_phrases.iter().any(contains) {
            return None;
        }
        let found: Vec<f64> = search
            .words
            .iter()
            .filter_map(|w| scores.get(w).copied())
            .collect();
        if found.is_empty() && !search.words.is_empty() {
            return None;
        }
        Some(found.iter().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn index(fields: &[(&str, i32)]) -> TextIndex {
        TextIndex {
            weights: fields.iter().map(|(f, w)| (f.to_string(), *w)).collect(),
            default_language: Language::parse("english").unwrap(),
            language_override: "language".into(),
        }
    }

    fn search(text: &str) -> TextQuery {
        TextQuery::parse(&Bson::Document(doc! { "$search": text })).unwrap()
    }

    #[test]
    fn stop_words_are_sorted_for_lookup() {
        let mut sorted = ENGLISH_STOP_WORDS.to_vec();
        sorted.sort();
        assert_eq!(sorted, ENGLISH_STOP_WORDS);
    }

    #[test]
    fn words_are_folded_stemmed_and_stop_words_dropped() {
        let ix = index(&[("content", 1)]);
        let doc = doc! { "content": "The Runners are RUNNING; café well-known" };
        assert_eq!(
            ix.document_terms(&doc),
            vec!["cafe", "known", "run", "runner", "well"]
        );
        assert!(search("run").matches(&ix, &doc));
        assert!(search("Cafe").matches(&ix, &doc));
        assert!(!search("the").matches(&ix, &doc));
        assert!(!search("walk").matches(&ix, &doc));
    }

    #[test]
    fn phrases_and_negations() {
        let ix = index(&[("content", 1)]);
        let fox = doc! { "content": "the quick brown fox" };
        assert!(search("\"brown fox\"").matches(&ix, &fox));
        assert!(!search("\"fox brown\"").matches(&ix, &fox));
        assert!(!search("quick -fox").matches(&ix, &fox));
        assert!(!search("-fox").matches(&ix, &fox));
        assert!(search("quick -dog").matches(&ix, &fox));
        assert!(!search("quick -\"brown fox\"").matches(&ix, &fox));
    }

    #[test]
    fn scores_follow_mongodb_formula() {
        let ix = index(&[("title", 10), ("body", 1)]);
        let doc = doc! { "title": "tea", "body": "tea tea coffee" };
        // title: one word, found once, the whole field: 10 × 1 × 1 × 1.1;
        // body: 2 of 3 words: 1 × 1.5 × (0.5 × 2/3 + 0.5).
        let expected = 10.0 * 1.1 + 1.5 * (0.5 * 2.0 / 3.0 + 0.5);
        let score = search("tea").score(&ix, &doc).unwrap();
        assert!((score - expected).abs() < 1e-9, "{score}");
        // A stemmed word is not the whole field ("coffee" is indexed as "coffe").
        let doc = doc! { "title": "coffee" };
        let score = search("coffee").score(&ix, &doc).unwrap();
        let expected = 10.0;
        assert!((score - expected).abs() < 1e-9, "{score}");
    }

    #[test]
    fn options_are_checked() {
        let code = |spec: Document| TextQuery::parse(&Bson::Document(spec)).unwrap_err().code;
        assert_eq!(code(doc! {}), ErrorCode::NO_SUCH_KEY);
        assert_eq!(code(doc! { "$search": "a", "$x": 1 }), ErrorCode::BAD_VALUE);
        assert_eq!(
            code(doc! { "$search": "a", "$language": "klingon" }),
            ErrorCode::BAD_VALUE
        );
        assert_eq!(code(doc! { "$search": 1 }), ErrorCode::TYPE_MISMATCH);
        assert_eq!(
            code(doc! { "$search": "a", "$caseSensitive": 1 }),
            ErrorCode::TYPE_MISMATCH
        );
    }
}
