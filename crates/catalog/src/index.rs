//! Index specifications and the keys a document produces for an index.
//!
//! A document yields one key per index, or several when an indexed path reaches an array
//! (a multikey index, as in MongoDB: one entry per element, an empty array indexed as
//! `undefined`, a missing field as `null`). Keys are encoded with
//! `basalt_value::key_string`, so bytewise order is MongoDB's value order — under the
//! index's collation when it has one, so a case-insensitive unique index sees "ABC" and
//! "abc" as one key.

use basalt_error::{Error, ErrorCode, Result};
use basalt_query::text::{Language, TextIndex};
use basalt_query::Matcher;
use basalt_value::key_string::encode_key_with;
pub use basalt_value::key_string::hashed_value;
use basalt_value::Collation;
use bson::{doc, Bson, Document};
use std::sync::Arc;

/// The first field of a wildcard index's keys: the path of the value that follows.
pub const WILDCARD_PATH_FIELD: &str = "$_path";

/// What a wildcard index covers: the subtree of `prefix` (everything without one), and
/// the paths its `wildcardProjection` includes or excludes (with `_id`'s own setting).
#[derive(Clone, Debug, PartialEq)]
pub struct Wildcard {
    pub prefix: Option<String>,
    pub projection: Option<(bool, Vec<String>, Option<bool>)>,
}

impl Wildcard {
    /// Whether the index holds the values at `path`.
    pub fn covers(&self, path: &str) -> bool {
        let under = |path: &str, root: &str| {
            path == root
                || path
                    .strip_prefix(root)
                    .is_some_and(|rest| rest.starts_with('.'))
        };
        if let Some(prefix) = &self.prefix {
            return under(path, prefix);
        }
        let top = path.split('.').next().unwrap_or(path);
        match &self.projection {
            None => top != "_id",
            Some((_, _, Some(id))) if top == "_id" => *id,
            Some(_) if top == "_id" => false,
            Some((true, paths, _)) => paths.iter().any(|root| under(path, root)),
            Some((false, paths, _)) => !paths.iter().any(|root| under(path, root)),
        }
    }

    /// Whether some path under `path` may be covered (worth descending into).
    fn may_cover_within(&self, path: &str) -> bool {
        let above = |root: &str| {
            root.strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('.'))
        };
        match (&self.prefix, &self.projection) {
            (Some(prefix), _) => self.covers(path) || above(prefix),
            (None, Some((true, paths, _))) => {
                self.covers(path) || paths.iter().any(|root| above(root))
            }
            _ => self.covers(path) || path.split('.').next() != Some("_id"),
        }
    }
}

/// Collects the leaf values of `doc` (under `prefix`) that `wildcard` covers: scalars,
/// the elements of arrays, and empty documents and arrays, with their paths.
fn wildcard_leaves(
    doc: &Document,
    prefix: &str,
    wildcard: &Wildcard,
    out: &mut Vec<(String, Bson)>,
) {
    for (field, value) in doc {
        let path = if prefix.is_empty() {
            field.clone()
        } else {
            format!("{prefix}.{field}")
        };
        wildcard_value(&path, value, wildcard, out, true);
    }
}

fn wildcard_value(
    path: &str,
    value: &Bson,
    wildcard: &Wildcard,
    out: &mut Vec<(String, Bson)>,
    top: bool,
) {
    match value {
        Bson::Document(inner) if !inner.is_empty() => {
            if wildcard.may_cover_within(path) {
                wildcard_leaves(inner, path, wildcard, out);
            }
        }
        Bson::Array(items) if !items.is_empty() && top => {
            for item in items {
                wildcard_value(path, item, wildcard, out, false);
            }
        }
        leaf => {
            if wildcard.covers(path) {
                out.push((path.to_string(), leaf.clone()));
            }
        }
    }
}

/// The key pattern field of a text index's terms, as MongoDB names it.
pub const TEXT_KEY_FIELD: &str = "_fts";
/// The key pattern field that follows it (MongoDB keeps the term's score there).
pub const TEXT_SCORE_KEY_FIELD: &str = "_ftsx";

/// The longest encoded key an index entry holds: the storage engine's 65,535-byte key
/// less the index id before it and the record id after it.
pub const MAX_KEY_BYTES: usize = u16::MAX as usize - 16;

/// The most an index entry stores of its document's values (see
/// [`IndexSpec::stored_values`]): enough for the keys of real indexes, while a large
/// string does not double its size in the index.
pub const STORED_VALUES_BYTES_MAX: usize = 1024;

/// One index of a collection, as stored in the catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexSpec {
    /// Storage id: the prefix of every entry of this index.
    pub id: u64,
    pub name: String,
    /// The key pattern, e.g. `{a: 1, b: -1}`.
    pub key: Document,
    pub unique: bool,
    pub sparse: bool,
    /// Whether some document has reached an array through an indexed path. The planner
    /// may intersect bounds on a field only while this is false (a multikey entry
    /// matches `{$gt: 1, $lt: 5}` through two different elements).
    pub multikey: bool,
    /// A TTL index: documents whose indexed date is this far in the past are deleted.
    pub expire_after_seconds: Option<i64>,
    /// A partial index: only documents matching this filter are indexed.
    pub partial: Option<PartialFilter>,
    /// The collation its string keys are ordered by; `None` for binary order.
    pub collation: Option<Collation>,
    /// Hidden from the planner (maintained all the same), as MongoDB 4.4's hidden
    /// indexes: a way to see what dropping an index would do without rebuilding it.
    pub hidden: bool,
    /// Options echoed by `listIndexes` as they were given: the index version `v` (1 or
    /// 2), `background`, `storageEngine`, and a text index's `weights`,
    /// `default_language`, `language_override` and `textIndexVersion` (which its entries
    /// are made by, see [`IndexSpec::text`]).
    pub echoed: Document,
}

/// A partial index's `partialFilterExpression`, parsed once.
#[derive(Clone, Debug)]
pub struct PartialFilter {
    pub expression: Document,
    matcher: Arc<Matcher>,
}

impl PartialFilter {
    pub fn new(expression: Document) -> Result<PartialFilter> {
        Ok(PartialFilter {
            matcher: Arc::new(Matcher::new(&expression)?),
            expression,
        })
    }
}

impl PartialEq for PartialFilter {
    fn eq(&self, other: &PartialFilter) -> bool {
        self.expression == other.expression
    }
}

/// The keys one document produces for an index, and whether an indexed path reached
/// an array (which makes the index multikey).
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentKeys {
    pub keys: Vec<IndexKey>,
    pub multikey: bool,
}

/// A key a document produces for an index: the encoded bytes and the values they encode
/// (for DuplicateKey errors).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexKey {
    pub encoded: Vec<u8>,
    pub values: Vec<Bson>,
}

impl IndexSpec {
    /// Whether `key` is this index's key pattern: the same fields in the same order
    /// (`{a: 1, b: 1}` is not `{b: 1, a: 1}`), numeric directions equal by value
    /// (`{a: 1}` is `{a: 1.0}`), as mongod compares key patterns.
    pub fn has_key_pattern(&self, key: &Document) -> bool {
        self.key.len() == key.len()
            && self.key.iter().zip(key).all(|((fa, da), (fb, db))| {
                fa == fb
                    && match (basalt_value::as_f64(da), basalt_value::as_f64(db)) {
                        (Some(x), Some(y)) => x == y,
                        _ => da == db,
                    }
            })
    }

    pub const ID_INDEX_NAME: &'static str = "_id_";

    pub fn id_index(id: u64, name: &str) -> IndexSpec {
        IndexSpec {
            id,
            name: name.to_string(),
            key: doc! { "_id": 1 },
            unique: true,
            sparse: false,
            multikey: false,
            expire_after_seconds: None,
            partial: None,
            collation: None,
            hidden: false,
            echoed: Document::new(),
        }
    }

    /// The built-in `_id` index (named `_id_`, or as a clustered collection's
    /// `clusteredIndex` names it). No other index can have this key pattern.
    pub fn is_id_index(&self) -> bool {
        self.key.len() == 1
            && self
                .key
                .get("_id")
                .and_then(basalt_value::as_f64)
                .is_some_and(|d| d == 1.0)
    }

    /// The spec as `listIndexes` reports it.
    pub fn to_list_document(&self) -> Document {
        let version = self.echoed.get("v").cloned().unwrap_or(Bson::Int32(2));
        let mut d = doc! { "v": version, "key": self.key.clone(), "name": self.name.clone() };
        if self.unique && !self.is_id_index() {
            d.insert("unique", true);
        }
        if self.sparse {
            d.insert("sparse", true);
        }
        if let Some(partial) = &self.partial {
            d.insert("partialFilterExpression", partial.expression.clone());
        }
        if let Some(seconds) = self.expire_after_seconds {
            d.insert(
                "expireAfterSeconds",
                i32::try_from(seconds).map_or(Bson::Int64(seconds), Bson::Int32),
            );
        }
        if let Some(collation) = &self.collation {
            d.insert("collation", collation.spec().clone());
        }
        if self.hidden {
            d.insert("hidden", true);
        }
        for (option, value) in self.echoed.iter().filter(|(option, _)| *option != "v") {
            d.insert(option, value.clone());
        }
        d
    }

    pub fn to_catalog_document(&self) -> Document {
        let mut d = doc! {
            "id": self.id as i64,
            "name": self.name.clone(),
            "key": self.key.clone(),
            "unique": self.unique,
            "sparse": self.sparse,
            "multikey": self.multikey,
        };
        if let Some(seconds) = self.expire_after_seconds {
            d.insert("expireAfterSeconds", seconds);
        }
        if let Some(partial) = &self.partial {
            d.insert("partialFilterExpression", partial.expression.clone());
        }
        if let Some(collation) = &self.collation {
            d.insert("collation", collation.spec().clone());
        }
        if self.hidden {
            d.insert("hidden", true);
        }
        if !self.echoed.is_empty() {
            d.insert("echoed", self.echoed.clone());
        }
        d
    }

    pub fn from_catalog_document(d: &Document) -> Result<IndexSpec> {
        let corrupt =
            |what: &str| Error::internal(format!("corrupt index entry in catalog: {what}"));
        Ok(IndexSpec {
            id: d.get_i64("id").map_err(|_| corrupt("id"))? as u64,
            name: d.get_str("name").map_err(|_| corrupt("name"))?.to_string(),
            key: d.get_document("key").map_err(|_| corrupt("key"))?.clone(),
            unique: d.get_bool("unique").unwrap_or(false),
            sparse: d.get_bool("sparse").unwrap_or(false),
            // Specs written before multikey tracking may cover arrays.
            multikey: d.get_bool("multikey").unwrap_or(true),
            expire_after_seconds: d.get_i64("expireAfterSeconds").ok(),
            partial: d
                .get_document("partialFilterExpression")
                .ok()
                .map(|e| PartialFilter::new(e.clone()))
                .transpose()?,
            collation: match d.get_document("collation") {
                Ok(spec) => Collation::parse(spec)?,
                Err(_) => None,
            },
            hidden: d.get_bool("hidden").unwrap_or(false),
            echoed: d.get_document("echoed").cloned().unwrap_or_default(),
        })
    }

    /// The `{field: value}` document naming the values of a key, for `keyValue`.
    pub fn key_value_document(&self, key: &IndexKey) -> Document {
        self.key
            .keys()
            .cloned()
            .zip(key.values.iter().cloned())
            .collect()
    }

    /// The fields whose values an entry of this index stores beside its key, so that a
    /// query reading only them is answered without fetching documents (a covered
    /// query): the key pattern's top-level fields. The encoded key cannot give values
    /// back (1, 1.0 and NumberLong(1) share a key; a collated string is a sort key).
    /// None for the `_id` index (every insert writes it, and a query reading `_id` alone
    /// is rare) or a hashed index (its keys are hashes).
    pub fn stored_fields(&self) -> impl Iterator<Item = &str> {
        let stores = !self.is_id_index() && !self.key.values().any(is_hashed);
        self.key
            .keys()
            .filter(move |path| stores && !path.contains('.'))
            .map(String::as_str)
    }

    /// The top-level fields of a document that its entries for this index are made
    /// from: its key's paths' first fields. `None` when any field may be (a wildcard
    /// or text index, or a partial filter).
    pub fn top_level_fields(&self) -> Option<Vec<&str>> {
        if self.is_column_store() {
            return Some(Vec::new());
        }
        if self.partial.is_some() || self.wildcard().is_some() || self.text().is_some() {
            return None;
        }
        Some(
            self.key
                .keys()
                .map(|path| path.split('.').next().unwrap_or(path))
                .collect(),
        )
    }

    /// What the entries for `doc` (whose keys are `keys`) store beside their key:
    /// `doc`'s values of the [`IndexSpec::stored_fields`] (those it has) as a BSON
    /// document. Empty when the index stores none, when `doc` reaches an array (each of
    /// its entries would hold the whole array, and a multikey index covers nothing), or
    /// when the values are larger than [`STORED_VALUES_BYTES_MAX`]: a query then reads
    /// the record.
    fn stored_values(&self, doc: &Document, keys: &DocumentKeys) -> Result<Vec<u8>> {
        if keys.multikey || self.stored_fields().next().is_none() {
            return Ok(Vec::new());
        }
        let mut stored = Document::new();
        for field in self.stored_fields() {
            if let Some(value) = doc.get(field) {
                stored.insert(field, value.clone());
            }
        }
        let bytes = stored.to_vec()?;
        Ok(if bytes.len() > STORED_VALUES_BYTES_MAX {
            Vec::new()
        } else {
            bytes
        })
    }

    /// Whether a write may not add a key other documents have: a unique index, or one
    /// being prepared to become unique (`collMod` `prepareUnique`, which leaves the
    /// duplicates already there).
    pub fn rejects_duplicates(&self) -> bool {
        self.unique || self.echoed.get_bool("prepareUnique").unwrap_or(false)
    }

    /// A wildcard index's definition (its key pattern is `{"$**": d}` or
    /// `{"path.$**": d}`); `None` for any other index.
    pub fn wildcard(&self) -> Option<Wildcard> {
        let (field, kind) = self.key.iter().next().filter(|_| self.key.len() == 1)?;
        if crate::column_store::is_column_store(kind) {
            return None;
        }
        let prefix = match field.as_str() {
            "$**" => None,
            scoped => Some(scoped.strip_suffix(".$**")?.to_string()),
        };
        let projection = self
            .echoed
            .get_document("wildcardProjection")
            .ok()
            .map(|p| {
                let include = p.iter().any(|(path, v)| {
                    path != "_id"
                        && (v.as_bool() == Some(true)
                            || basalt_value::as_f64(v).is_some_and(|n| n != 0.0))
                });
                let paths = p.keys().filter(|path| *path != "_id").cloned().collect();
                let id = p.get("_id").map(|v| {
                    v.as_bool() == Some(true) || basalt_value::as_f64(v).is_some_and(|n| n != 0.0)
                });
                (include, paths, id)
            });
        Some(Wildcard { prefix, projection })
    }

    /// A wildcard index's entries for `doc`: one per leaf value (array elements
    /// included) of each path the index covers, keyed by the path and the value.
    fn wildcard_keys(&self, wildcard: &Wildcard, doc: &Document) -> Result<DocumentKeys> {
        let mut leaves = Vec::new();
        wildcard_leaves(doc, "", wildcard, &mut leaves);
        let mut keys: Vec<IndexKey> = Vec::with_capacity(leaves.len());
        for (path, value) in leaves {
            let values = vec![Bson::String(path), value];
            let parts: Vec<(&Bson, bool)> = values.iter().map(|v| (v, false)).collect();
            let encoded = encode_key_with(&parts, self.collation.as_ref());
            if keys.iter().any(|k| k.encoded == encoded) {
                continue;
            }
            let key = IndexKey { encoded, values };
            self.check_key_size(&key)?;
            keys.push(key);
        }
        Ok(DocumentKeys {
            keys,
            multikey: true,
        })
    }

    /// The key pattern a wildcard index has for one path: the path, then its value.
    pub fn wildcard_for_path(&self, path: &str) -> IndexSpec {
        let mut virtual_index = self.clone();
        virtual_index.key = doc! { WILDCARD_PATH_FIELD: 1, path: 1 };
        virtual_index.multikey = true;
        virtual_index
    }

    /// A text index's definition (its key pattern holds `_fts: "text"`); `None` for any
    /// other index.
    pub fn text(&self) -> Option<TextIndex> {
        if self.key.get_str(TEXT_KEY_FIELD).ok() != Some("text") {
            return None;
        }
        let weights = self
            .echoed
            .get_document("weights")
            .map(|weights| {
                weights
                    .iter()
                    .map(|(path, weight)| {
                        (
                            path.clone(),
                            basalt_value::as_i64(weight).unwrap_or(1) as i32,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(TextIndex {
            weights,
            default_language: self
                .echoed
                .get_str("default_language")
                .ok()
                .and_then(Language::parse)
                .unwrap_or(Language::ENGLISH),
            language_override: self
                .echoed
                .get_str("language_override")
                .unwrap_or("language")
                .to_string(),
        })
    }

    /// A text index's entries for `doc`: one per term of its indexed strings (none
    /// without any: text indexes are sparse), with the document's values of the other
    /// fields of a compound text index.
    fn text_keys(&self, text: &TextIndex, doc: &Document) -> Result<DocumentKeys> {
        if let Some(partial) = &self.partial {
            if !partial.matcher.try_matches(doc)? {
                return Ok(DocumentKeys {
                    keys: Vec::new(),
                    multikey: false,
                });
            }
        }
        let keys = self.term_keys(doc, text.document_terms(doc), |field, term| match field {
            TEXT_KEY_FIELD => Some(Bson::String(term.clone())),
            TEXT_SCORE_KEY_FIELD => Some(Bson::Null),
            _ => None,
        })?;
        Ok(DocumentKeys {
            keys,
            multikey: true,
        })
    }

    /// The keys of an index whose entries are made per term of a document (a text
    /// index's words, a geo index's cells): for each term, the values `place` gives for
    /// the fields it fills from the term, and the document's values of the others.
    pub(crate) fn term_keys<T>(
        &self,
        doc: &Document,
        terms: impl IntoIterator<Item = T>,
        place: impl Fn(&str, &T) -> Option<Bson>,
    ) -> Result<Vec<IndexKey>> {
        let mut keys = Vec::new();
        for term in terms {
            let values: Vec<Bson> = self
                .key
                .keys()
                .map(|field| {
                    place(field, &term).unwrap_or_else(|| {
                        basalt_value::path::get_path(doc, field)
                            .cloned()
                            .unwrap_or(Bson::Null)
                    })
                })
                .collect();
            let key = IndexKey {
                encoded: self.encode(&values),
                values,
            };
            self.check_key_size(&key)?;
            keys.push(key);
        }
        Ok(keys)
    }

    /// Whether the key pattern's field at `position` is descending.
    pub fn is_descending_field(&self, position: usize) -> bool {
        self.key.values().nth(position).is_some_and(is_descending)
    }

    /// The encoded key for one value per indexed field, in key-pattern order.
    pub fn encode(&self, values: &[Bson]) -> Vec<u8> {
        let parts: Vec<(&Bson, bool)> = values
            .iter()
            .zip(self.key.values().map(is_descending))
            .collect();
        encode_key_with(&parts, self.collation.as_ref())
    }

    /// The keys of `doc` for this index and what each of their entries stores
    /// ([`IndexSpec::stored_values`]): what writing `doc`'s entries takes.
    pub fn entries_of(&self, doc: &Document) -> Result<(DocumentKeys, Vec<u8>)> {
        let keys = self.document_keys(doc)?;
        let stored = self.stored_values(doc, &keys)?;
        Ok((keys, stored))
    }

    /// Whether a document's keys for this index come from its `_id` alone (the `_id`
    /// index, which has no partial filter), so [`IndexSpec::id_key`] gives them.
    pub fn keyed_by_id_alone(&self) -> bool {
        self.is_id_index() && self.partial.is_none()
    }

    /// Refuses a key longer than an index entry can hold: the storage engine's keys
    /// hold 65,535 bytes, the index id and record id around the key included. KeyTooLong,
    /// as mongod 4.0 refused keys past 1,024 bytes (later versions have no limit).
    pub fn check_key_size(&self, key: &IndexKey) -> Result<()> {
        if key.encoded.len() <= MAX_KEY_BYTES {
            return Ok(());
        }
        Err(Error::new(
            ErrorCode::KEY_TOO_LONG,
            format!(
                "key too large to index, failing {} bytes in index {} (the most is {MAX_KEY_BYTES})",
                key.encoded.len(),
                self.name
            ),
        ))
    }

    /// The key of the `_id` index for a document whose `_id` is `id`: always exactly one
    /// (an `_id` is never an array), found without looking at the rest of the document.
    pub fn id_key(&self, id: Bson) -> IndexKey {
        let encoded = encode_key_with(&[(&id, false)], self.collation.as_ref());
        IndexKey {
            encoded,
            values: vec![id],
        }
    }

    /// Every distinct key `doc` produces for this index; none for a sparse index when
    /// all indexed fields are missing.
    pub fn keys_for(&self, doc: &Document) -> Result<Vec<IndexKey>> {
        Ok(self.document_keys(doc)?.keys)
    }

    /// The keys of `doc` and whether they made the index multikey.
    pub fn document_keys(&self, doc: &Document) -> Result<DocumentKeys> {
        if self.is_column_store() {
            // Its entries are row groups, written apart (`column_store.rs`).
            return Ok(DocumentKeys {
                keys: Vec::new(),
                multikey: false,
            });
        }
        if let Some(text) = self.text() {
            return self.text_keys(&text, doc);
        }
        if let Some(wildcard) = self.wildcard() {
            return self.wildcard_keys(&wildcard, doc);
        }
        if let Some(partial) = &self.partial {
            if !partial.matcher.try_matches(doc)? {
                return Ok(DocumentKeys {
                    keys: Vec::new(),
                    multikey: false,
                });
            }
        }
        if let Some(geo) = self.geo() {
            return self.geo_keys(&geo, doc);
        }
        let mut per_field: Vec<Vec<Bson>> = Vec::with_capacity(self.key.len());
        let mut any_present = false;
        let mut array_fields = 0;
        for (path, direction) in &self.key {
            let mut values = Vec::new();
            let reached_array = collect_index_values(doc, path, &mut values);
            if values.is_empty() {
                values.push(Bson::Null);
            } else {
                any_present = true;
            }
            if is_hashed(direction) {
                if reached_array {
                    return Err(Error::location(
                        16766,
                        "Error: hashed indexes do not currently support array values",
                    ));
                }
                values = values
                    .iter()
                    .map(|v| hashed_value(v, self.collation.as_ref()))
                    .collect();
            }
            if reached_array {
                array_fields += 1;
            }
            per_field.push(values);
        }
        if self.sparse && !any_present {
            return Ok(DocumentKeys {
                keys: Vec::new(),
                multikey: false,
            });
        }
        if array_fields > 1 {
            return Err(Error::new(
                ErrorCode::CANNOT_INDEX_PARALLEL_ARRAYS,
                format!("cannot index parallel arrays [{}]", self.name),
            ));
        }
        let mut keys: Vec<IndexKey> = Vec::new();
        let mut combination = vec![0usize; per_field.len()];
        loop {
            let values: Vec<Bson> = combination
                .iter()
                .zip(&per_field)
                .map(|(&i, vals)| vals[i].clone())
                .collect();
            let encoded = self.encode(&values);
            if !keys.iter().any(|k| k.encoded == encoded) {
                let key = IndexKey { encoded, values };
                self.check_key_size(&key)?;
                keys.push(key);
            }
            // Advance the odometer over the cartesian product of per-field values.
            let mut field = per_field.len();
            loop {
                if field == 0 {
                    return Ok(DocumentKeys {
                        keys,
                        multikey: array_fields > 0,
                    });
                }
                field -= 1;
                combination[field] += 1;
                if combination[field] < per_field[field].len() {
                    break;
                }
                combination[field] = 0;
            }
        }
    }
}

/// Whether a key pattern field is `"hashed"`: its key is a hash of the value, which
/// spreads values evenly (for sharding) and serves equality only.
pub fn is_hashed(direction: &Bson) -> bool {
    matches!(direction, Bson::String(kind) if kind == "hashed")
}

fn is_descending(direction: &Bson) -> bool {
    match direction {
        Bson::Int32(n) => *n < 0,
        Bson::Int64(n) => *n < 0,
        Bson::Double(n) => *n < 0.0,
        _ => false,
    }
}

/// Pushes the values `path` reaches in `doc`, expanding arrays as MongoDB's multikey
/// indexes do. Returns whether an array was expanded on the way.
fn collect_index_values(doc: &Document, path: &str, out: &mut Vec<Bson>) -> bool {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    match doc.get(head) {
        None => false,
        Some(value) => collect_from_value(value, rest, out),
    }
}

fn collect_from_value(value: &Bson, rest: Option<&str>, out: &mut Vec<Bson>) -> bool {
    match (value, rest) {
        (Bson::Array(items), None) => {
            if items.is_empty() {
                out.push(Bson::Undefined);
            } else {
                out.extend(items.iter().cloned());
            }
            true
        }
        (other, None) => {
            out.push(other.clone());
            false
        }
        (Bson::Document(sub), Some(rest)) => collect_index_values(sub, rest, out),
        (Bson::Array(items), Some(rest)) => {
            let (head, tail) = match rest.split_once('.') {
                Some((head, tail)) => (head, Some(tail)),
                None => (rest, None),
            };
            // A numeric component may name an array position.
            if let Ok(position) = head.parse::<usize>() {
                if let Some(item) = items.get(position) {
                    return collect_from_value(item, tail, out);
                }
            }
            for item in items {
                if let Bson::Document(sub) = item {
                    collect_index_values(sub, rest, out);
                }
            }
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_store_small_top_level_values_of_documents_without_arrays() {
        let s = spec(doc! { "a": 1, "b.c": -1 });
        let stored = |d: Document| s.stored_values(&d, &s.document_keys(&d).unwrap()).unwrap();
        let values = stored(doc! { "a": 1.5, "b": { "c": 2 }, "z": 3 });
        assert_eq!(
            Document::from_reader(values.as_slice()).unwrap(),
            doc! { "a": 1.5 }
        );
        // Missing stays missing: an empty document, not "no values".
        assert_eq!(
            Document::from_reader(stored(doc! { "z": 3 }).as_slice()).unwrap(),
            doc! {}
        );
        // Each entry of a multikey document would hold the whole array: none is kept.
        assert!(stored(doc! { "a": [1, 2, 3] }).is_empty());
        assert!(stored(doc! { "a": "x".repeat(STORED_VALUES_BYTES_MAX) }).is_empty());
        let id = IndexSpec::id_index(1, IndexSpec::ID_INDEX_NAME);
        let d = doc! { "_id": 1 };
        assert!(id
            .stored_values(&d, &id.document_keys(&d).unwrap())
            .unwrap()
            .is_empty());
    }

    fn spec(key: Document) -> IndexSpec {
        IndexSpec {
            id: 9,
            name: "t".into(),
            key,
            unique: false,
            sparse: false,
            multikey: false,
            expire_after_seconds: None,
            partial: None,
            collation: None,
            hidden: false,
            echoed: Document::new(),
        }
    }

    #[test]
    fn hashed_fields_store_stable_hashes_of_equal_values() {
        let s = spec(doc! { "a": "hashed" });
        let one = s.keys_for(&doc! { "a": 1 }).unwrap();
        assert_eq!(one, s.keys_for(&doc! { "a": 1.0 }).unwrap());
        assert_eq!(one[0].values, vec![hashed_value(&Bson::Int32(1), None)]);
        assert_ne!(
            hashed_value(&Bson::Int32(1), None),
            hashed_value(&Bson::Int32(2), None)
        );
        // Persisted: the hash of a value must never change.
        assert_eq!(
            hashed_value(&Bson::Int32(1), None),
            hashed_value(&Bson::Int64(1), None)
        );
        let err = s.keys_for(&doc! { "a": [1, 2] }).unwrap_err();
        assert_eq!(err.code.0, 16766);
    }

    #[test]
    fn partial_indexes_hold_only_matching_documents() {
        let mut s = spec(doc! { "a": 1 });
        s.partial = Some(PartialFilter::new(doc! { "b": { "$gt": 5 } }).unwrap());
        assert!(s.keys_for(&doc! { "a": 1, "b": 3 }).unwrap().is_empty());
        assert_eq!(s.keys_for(&doc! { "a": 1, "b": 6 }).unwrap().len(), 1);
    }

    #[test]
    fn multikey_and_missing_values() {
        let s = spec(doc! { "a.b": 1 });
        assert_eq!(
            s.keys_for(&doc! { "a": [{ "b": 1 }, { "b": 2 }, { "b": 1 }] })
                .unwrap()
                .len(),
            2
        );
        let missing = s.keys_for(&doc! { "x": 1 }).unwrap();
        assert_eq!(missing[0].values, vec![Bson::Null]);
        let empty = s.keys_for(&doc! { "a": { "b": [] } }).unwrap();
        assert_eq!(empty[0].values, vec![Bson::Undefined]);
        assert!(
            s.document_keys(&doc! { "a": { "b": [] } })
                .unwrap()
                .multikey
        );
        assert!(!s.document_keys(&doc! { "a": { "b": 1 } }).unwrap().multikey);
    }

    #[test]
    fn compound_keys_and_parallel_arrays() {
        let s = spec(doc! { "a": 1, "b": -1 });
        assert_eq!(s.keys_for(&doc! { "a": [1, 2], "b": 3 }).unwrap().len(), 2);
        let err = s.keys_for(&doc! { "a": [1, 2], "b": [3, 4] }).unwrap_err();
        assert_eq!(err.code, ErrorCode::CANNOT_INDEX_PARALLEL_ARRAYS);
    }

    #[test]
    fn sparse_skips_documents_without_the_fields() {
        let mut s = spec(doc! { "a": 1 });
        s.sparse = true;
        assert!(s.keys_for(&doc! { "b": 1 }).unwrap().is_empty());
        assert_eq!(s.keys_for(&doc! { "a": null }).unwrap().len(), 1);
    }

    #[test]
    fn numerically_equal_values_share_a_key() {
        let s = spec(doc! { "_id": 1 });
        let a = s.keys_for(&doc! { "_id": 1 }).unwrap();
        let b = s.keys_for(&doc! { "_id": 1.0 }).unwrap();
        assert_eq!(a[0].encoded, b[0].encoded);
    }

    fn case_insensitive() -> Collation {
        Collation::parse(&doc! { "locale": "en", "strength": 2 })
            .unwrap()
            .unwrap()
    }

    #[test]
    fn collated_keys_equal_for_strings_the_collation_equates() {
        let mut s = spec(doc! { "a": 1, "b": -1 });
        s.collation = Some(case_insensitive());
        let upper = s.keys_for(&doc! { "a": "ABC", "b": ["X", 2] }).unwrap();
        let lower = s.keys_for(&doc! { "a": "abc", "b": ["x", 2] }).unwrap();
        assert_eq!(upper.len(), 2);
        assert_eq!(
            upper.iter().map(|k| &k.encoded).collect::<Vec<_>>(),
            lower.iter().map(|k| &k.encoded).collect::<Vec<_>>()
        );
        // The values stay as stored, for keyValue in DuplicateKey errors.
        assert_eq!(upper[0].values, vec![Bson::from("ABC"), Bson::from("X")]);
        // Keys without strings are those of a binary index.
        let numbers = doc! { "a": 1, "b": 2.5 };
        assert_eq!(
            s.keys_for(&numbers).unwrap(),
            spec(doc! { "a": 1, "b": -1 }).keys_for(&numbers).unwrap()
        );
        let mut hashed = spec(doc! { "a": "hashed" });
        hashed.collation = Some(case_insensitive());
        assert_eq!(
            hashed.keys_for(&doc! { "a": "Q" }).unwrap(),
            hashed.keys_for(&doc! { "a": "q" }).unwrap()
        );
    }

    #[test]
    fn collation_survives_the_catalog_and_shows_in_list_indexes() {
        let mut s = spec(doc! { "a": 1 });
        s.collation = Some(case_insensitive());
        let stored = s.to_catalog_document();
        assert_eq!(IndexSpec::from_catalog_document(&stored).unwrap(), s);
        let listed = s.to_list_document();
        let collation = listed.get_document("collation").unwrap();
        assert_eq!(collation.get_str("locale").unwrap(), "en");
        assert_eq!(collation.get_i32("strength").unwrap(), 2);
        assert_eq!(collation.get_str("version").unwrap(), "57.1");
        assert!(!spec(doc! { "a": 1 })
            .to_list_document()
            .contains_key("collation"));
        assert!(!spec(doc! { "a": 1 })
            .to_catalog_document()
            .contains_key("collation"));
    }
}
