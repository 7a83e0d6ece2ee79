//! Index bounds: for each field of an index's key pattern, the ordered list of value
//! intervals a matching document's key can fall in (MongoDB's "ordered interval list"),
//! and the byte ranges of encoded keys they become.
//!
//! Bounds follow MongoDB's rules: equality and `$in` give points, comparisons give
//! intervals bracketed by type (`$gt: 5` is `(5, inf.0]`, not everything above 5 in the
//! sort order), `$exists: false` and `null` give `[null, null]`, and conditions on one
//! field are intersected only when the index is not multikey (an array can satisfy
//! `$gt` and `$lt` through different elements). Exclusive ends are scanned as inclusive:
//! the executor re-checks each document, so bounds need only be a superset.
//!
//! An index with a collation holds strings as collation sort keys, so its bounds on
//! strings are built, ordered and encoded under that collation, and a query may bound
//! strings on it only when it compares strings by the same collation (a binary index
//! only for a binary query). Conditions on values without strings bound any index, as in
//! MongoDB: numbers, dates and the rest encode alike under every collation.

use crate::predicate::Condition;
use basalt_catalog::IndexSpec;
use basalt_value::key_string::{encode_value_with, encoded_len};
use basalt_value::{compare_values_with, Collation};
use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, Timestamp};
use std::cmp::Ordering;

/// Point combinations of leading equality fields expanded into separate ranges, at most;
/// beyond this the rest is checked per key.
const EXPANDED_RANGES_MAX: usize = 4096;

/// One interval of values, in ascending value order.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    pub start: Bson,
    pub start_inclusive: bool,
    pub end: Bson,
    pub end_inclusive: bool,
}

impl Interval {
    pub fn point(value: Bson) -> Interval {
        Interval {
            start: value.clone(),
            start_inclusive: true,
            end: value,
            end_inclusive: true,
        }
    }

    pub fn all_values() -> Interval {
        Interval {
            start: Bson::MinKey,
            start_inclusive: true,
            end: Bson::MaxKey,
            end_inclusive: true,
        }
    }

    /// Whether the interval holds one value, `collation` deciding which strings are one.
    pub fn is_point(&self, collation: Option<&Collation>) -> bool {
        self.start_inclusive
            && self.end_inclusive
            && compare_values_with(&self.start, &self.end, collation) == Ordering::Equal
    }

    pub(crate) fn is_all_values(&self) -> bool {
        self == &Interval::all_values()
    }

    pub(crate) fn contains(&self, v: &Bson, collation: Option<&Collation>) -> bool {
        let after_start = match compare_values_with(&self.start, v, collation) {
            Ordering::Less => true,
            Ordering::Equal => self.start_inclusive,
            Ordering::Greater => false,
        };
        let before_end = match compare_values_with(v, &self.end, collation) {
            Ordering::Less => true,
            Ordering::Equal => self.end_inclusive,
            Ordering::Greater => false,
        };
        after_start && before_end
    }

    fn intersect(&self, other: &Interval, collation: Option<&Collation>) -> Option<Interval> {
        let compare = |a: &Bson, b: &Bson| compare_values_with(a, b, collation);
        let (start, start_inclusive) = match compare(&self.start, &other.start) {
            Ordering::Less => (&other.start, other.start_inclusive),
            Ordering::Greater => (&self.start, self.start_inclusive),
            Ordering::Equal => (&self.start, self.start_inclusive && other.start_inclusive),
        };
        let (end, end_inclusive) = match compare(&self.end, &other.end) {
            Ordering::Less => (&self.end, self.end_inclusive),
            Ordering::Greater => (&other.end, other.end_inclusive),
            Ordering::Equal => (&self.end, self.end_inclusive && other.end_inclusive),
        };
        let non_empty = match compare(start, end) {
            Ordering::Less => true,
            Ordering::Equal => start_inclusive && end_inclusive,
            Ordering::Greater => false,
        };
        non_empty.then(|| Interval {
            start: start.clone(),
            start_inclusive,
            end: end.clone(),
            end_inclusive,
        })
    }

    /// MongoDB's explain form, e.g. `[1, 1]`, `(5, inf.0]`, `[MaxKey, MinKey]` (listed
    /// high to low for a descending field).
    fn to_explain(&self, descending: bool, collation: Option<&Collation>) -> String {
        let (open, close) = (
            if self.start_inclusive { '[' } else { '(' },
            if self.end_inclusive { ']' } else { ')' },
        );
        let (start, end) = (
            bound_to_string(&self.start, collation),
            bound_to_string(&self.end, collation),
        );
        if descending {
            let (open, close) = (
                if self.end_inclusive { '[' } else { '(' },
                if self.start_inclusive { ']' } else { ')' },
            );
            format!("{open}{end}, {start}{close}")
        } else {
            format!("{open}{start}, {end}{close}")
        }
    }
}

/// A bound as explain shows it; under a collation a string bound is its sort key, as
/// MongoDB shows `CollationKey(0x...)`.
fn bound_to_string(v: &Bson, collation: Option<&Collation>) -> String {
    match v {
        Bson::String(s) | Bson::Symbol(s) if collation.is_some() => {
            let mut sort_key = Vec::new();
            if let Some(collation) = collation {
                collation.write_sort_key(s, &mut sort_key);
            }
            let hex: String = sort_key.iter().map(|b| format!("{b:02x}")).collect();
            format!("CollationKey(0x{hex})")
        }
        Bson::MinKey => "MinKey".into(),
        Bson::MaxKey => "MaxKey".into(),
        Bson::Double(d) if d.is_infinite() => if *d > 0.0 { "inf.0" } else { "-inf.0" }.into(),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        other => basalt_value::display::value_to_string(other),
    }
}

/// The bounds of one index for one filter.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexBounds {
    /// Per key-pattern field: path, direction (true = descending), intervals in
    /// ascending value order (disjoint).
    pub fields: Vec<(String, bool, Vec<Interval>)>,
    /// The index's collation, which orders and encodes its string bounds.
    pub collation: Option<Collation>,
}

impl IndexBounds {
    /// Bounds of `index` for the conditions `conditions_of` gives per field path, for a
    /// query comparing strings by `query_collation` (binary when `None`). When that is
    /// not the index's collation, no string-bearing condition may narrow the bounds.
    pub fn for_index<'a>(
        index: &IndexSpec,
        conditions_of: impl Fn(&str) -> &'a [Condition],
        query_collation: Option<&Collation>,
    ) -> IndexBounds {
        let collation = index.collation.as_ref();
        let strings_usable = collation == query_collation;
        let fields = index
            .key
            .iter()
            .map(|(path, direction)| {
                let descending = basalt_value::as_f64(direction).is_some_and(|d| d < 0.0);
                // A hashed field keeps no order: only equalities, as points of hashes.
                let hashed = basalt_catalog::is_hashed(direction);
                let mut lists = conditions_of(path)
                    .iter()
                    .filter(|c| !hashed || matches!(c, Condition::Eq(_) | Condition::In(_)))
                    .filter_map(|c| condition_intervals(c, strings_usable, collation))
                    .map(|list| {
                        if hashed {
                            hash_points(&list, collation)
                        } else {
                            list
                        }
                    });
                let intervals = match lists.next() {
                    None => vec![Interval::all_values()],
                    Some(first) if index.multikey => first,
                    Some(first) => {
                        lists.fold(first, |acc, next| intersect_lists(&acc, &next, collation))
                    }
                };
                (path.clone(), descending, intervals)
            })
            .collect();
        IndexBounds {
            fields,
            collation: index.collation.clone(),
        }
    }

    /// Bounds scanning the whole index (a hinted index with no usable condition).
    pub fn whole_index(index: &IndexSpec) -> IndexBounds {
        IndexBounds::for_index(index, |_| &[], None)
    }

    /// Whether the field's intervals are one point each, under the index's collation.
    fn all_points(&self, list: &[Interval]) -> bool {
        list.iter().all(|i| i.is_point(self.collation.as_ref()))
    }

    /// Whether the first field is narrowed (an index is worth using only then).
    pub fn leading_field_bounded(&self) -> bool {
        self.fields
            .first()
            .is_some_and(|(_, _, list)| !(list.len() == 1 && list[0].is_all_values()))
    }

    /// Whether any document missing the leading field could match (a sparse index
    /// does not hold such documents).
    pub fn leading_field_admits_null(&self) -> bool {
        self.fields.first().is_some_and(|(_, _, list)| {
            list.iter()
                .any(|i| i.contains(&Bson::Null, self.collation.as_ref()))
        })
    }

    /// Whether the bounds are empty (a contradiction such as `{a: {$gt: 5, $lt: 1}}`).
    pub fn is_empty(&self) -> bool {
        self.fields.iter().any(|(_, _, list)| list.is_empty())
    }

    /// The number of leading fields bounded to points, then whether the next one is
    /// bounded at all: how selective the bounds are, for choosing among indexes.
    pub fn selectivity(&self) -> (usize, usize) {
        let points = self
            .fields
            .iter()
            .take_while(|(_, _, list)| !list.is_empty() && self.all_points(list))
            .count();
        let bounded = self
            .fields
            .iter()
            .filter(|(_, _, list)| !(list.len() == 1 && list[0].is_all_values()))
            .count();
        (points, bounded)
    }

    /// `indexBounds` as explain shows it: in the order the scan reads keys, so a
    /// `backward` scan shows every field's intervals reversed.
    pub fn to_explain(&self, backward: bool) -> Document {
        self.fields
            .iter()
            .map(|(path, descending, list)| {
                let reading_down = *descending != backward;
                let mut shown: Vec<Bson> = list
                    .iter()
                    .map(|i| Bson::String(i.to_explain(reading_down, self.collation.as_ref())))
                    .collect();
                if reading_down {
                    shown.reverse();
                }
                (path.clone(), Bson::Array(shown))
            })
            .collect()
    }

    /// The byte ranges of encoded keys to scan, in ascending key order, and the
    /// per-key check of the fields the ranges do not pin.
    pub fn key_ranges(&self) -> (Vec<KeyRange>, KeyFilter) {
        let encoded: Vec<EncodedIntervals> = self
            .fields
            .iter()
            .map(|(_, descending, list)| {
                encode_intervals(list, *descending, self.collation.as_ref())
            })
            .collect();
        let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
        let mut field = 0;
        while field < self.fields.len() {
            let list = &self.fields[field].2;
            let all_points = self.all_points(list);
            if !all_points || prefixes.len() * list.len() > EXPANDED_RANGES_MAX {
                break;
            }
            prefixes = prefixes
                .iter()
                .flat_map(|p| {
                    encoded[field].iter().map(move |(point, _)| {
                        let mut key = p.clone();
                        key.extend_from_slice(point);
                        key
                    })
                })
                .collect();
            field += 1;
        }
        let ranges = match encoded.get(field) {
            None => prefixes
                .into_iter()
                .map(|p| KeyRange {
                    start: p.clone(),
                    end: p,
                    end_exclusive: false,
                })
                .collect(),
            Some(intervals) => {
                // Whether each interval, in byte order, excludes its last value.
                let (descending, list) = (self.fields[field].1, &self.fields[field].2);
                let mut end_exclusive: Vec<bool> = list
                    .iter()
                    .map(|i| {
                        !if descending {
                            i.start_inclusive
                        } else {
                            i.end_inclusive
                        }
                    })
                    .collect();
                if descending {
                    end_exclusive.reverse();
                }
                prefixes
                    .iter()
                    .flat_map(|p| {
                        intervals.iter().zip(&end_exclusive).map(
                            move |((start, end), &end_exclusive)| KeyRange {
                                start: [p.as_slice(), start].concat(),
                                end: [p.as_slice(), end].concat(),
                                end_exclusive,
                            },
                        )
                    })
                    .collect()
            }
        };
        let directions = self.fields.iter().map(|(_, d, _)| *d).collect();
        let checked = (field + 1..self.fields.len())
            .filter(|&f| {
                let list = &self.fields[f].2;
                !(list.len() == 1 && list[0].is_all_values())
            })
            .map(|f| (f, encoded[f].clone()))
            .collect();
        (
            ranges,
            KeyFilter {
                directions,
                checked,
            },
        )
    }
}

/// A range of encoded keys: every key `k` with `start <= k` and (`k <= end` or `k`
/// extending `end`), or with `end_exclusive` every such key below `end` and not
/// extending it. Bounds are whole components, so a key extending `end` has the same
/// components there. (An exclusive start is scanned from the start: the matcher
/// rejects what it lets in.)
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub end_exclusive: bool,
}

impl KeyRange {
    /// The bytes every key of the range starts with.
    pub fn common_prefix(&self) -> &[u8] {
        let n = self
            .start
            .iter()
            .zip(&self.end)
            .take_while(|(a, b)| a == b)
            .count();
        &self.start[..n]
    }

    pub fn is_past_end(&self, key: &[u8]) -> bool {
        if key.starts_with(&self.end) {
            self.end_exclusive
        } else {
            key > self.end.as_slice()
        }
    }

    /// Where a backward scan of the range starts: every key of the range is below these
    /// bytes (`None`: no bound).
    pub fn upper_limit(&self) -> Option<Vec<u8>> {
        if self.end_exclusive {
            Some(self.end.clone())
        } else {
            basalt_storage::prefix_upper_bound(&self.end)
        }
    }

    /// Whether a backward scan has gone below the range (keys extend its start).
    pub fn is_before_start(&self, key: &[u8]) -> bool {
        key < self.start.as_slice()
    }
}

/// Encoded intervals of one field: (start, end) byte pairs in ascending order.
type EncodedIntervals = Vec<(Vec<u8>, Vec<u8>)>;

/// Checks the fields after the range field, which ranges cannot pin, key by key, and
/// says where to seek when a key falls outside them.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyFilter {
    directions: Vec<bool>,
    /// Field position and its encoded intervals (ascending byte order).
    checked: Vec<(usize, EncodedIntervals)>,
}

/// The verdict on one index key.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyCheck {
    InBounds,
    /// Out of bounds: the next key that can be in bounds is after these bytes.
    SeekAfter(Vec<u8>),
    /// Out of bounds, reading backward: the next key that can be in bounds is below
    /// these bytes.
    SeekBefore(Vec<u8>),
}

impl KeyFilter {
    pub fn is_trivial(&self) -> bool {
        self.checked.is_empty()
    }

    /// Checks an encoded key (components only, or followed by anything), for a scan
    /// reading forward or `backward`.
    pub fn check(&self, key: &[u8], backward: bool) -> KeyCheck {
        let mut starts = Vec::with_capacity(self.directions.len() + 1);
        let mut pos = 0;
        for &descending in &self.directions {
            starts.push(pos);
            match encoded_len(&key[pos..], descending) {
                Some(len) => pos += len,
                // Not a key this index wrote: let the document re-check decide.
                None => return KeyCheck::InBounds,
            }
        }
        starts.push(pos);
        for (field, intervals) in &self.checked {
            let component = &key[starts[*field]..starts[*field + 1]];
            let head = &key[..starts[*field]];
            let verdict = if backward {
                seek_back(head, component, intervals)
            } else {
                seek_forward(head, component, intervals)
            };
            if let Some(verdict) = verdict {
                return verdict;
            }
        }
        KeyCheck::InBounds
    }
}

/// Where a forward scan goes from a key whose `component` (after `head`) may be out of
/// `intervals`; `None` when it is inside one.
fn seek_forward(head: &[u8], component: &[u8], intervals: &EncodedIntervals) -> Option<KeyCheck> {
    match intervals
        .iter()
        .find(|(_, end)| component <= end.as_slice())
    {
        Some((start, _)) if component >= start.as_slice() => None,
        // Below the next interval: skip to its start (entries extend it).
        Some((start, _)) => Some(KeyCheck::SeekAfter([head, start].concat())),
        // Past every interval: skip every key with this head. No type byte is 0xFF
        // either way up, so nothing with this head follows head+0xFF.
        None => Some(KeyCheck::SeekAfter([head, &[0xFF]].concat())),
    }
}

/// As [`seek_forward`], reading keys in descending order.
fn seek_back(head: &[u8], component: &[u8], intervals: &EncodedIntervals) -> Option<KeyCheck> {
    match intervals
        .iter()
        .rev()
        .find(|(start, _)| component >= start.as_slice())
    {
        Some((_, end)) if component <= end.as_slice() => None,
        // Above the next interval down: skip to just past its end and the keys
        // extending it.
        Some((_, end)) => {
            basalt_storage::prefix_upper_bound(&[head, end].concat()).map(KeyCheck::SeekBefore)
        }
        // Below every interval: skip every key with this head (all of them extend it).
        None => Some(KeyCheck::SeekBefore(head.to_vec())),
    }
}

fn encode_intervals(
    list: &[Interval],
    descending: bool,
    collation: Option<&Collation>,
) -> EncodedIntervals {
    let encode = |v: &Bson| {
        let mut out = Vec::new();
        encode_value_with(&mut out, v, descending, collation);
        out
    };
    let mut encoded: EncodedIntervals = list
        .iter()
        .map(|i| {
            if descending {
                (encode(&i.end), encode(&i.start))
            } else {
                (encode(&i.start), encode(&i.end))
            }
        })
        .collect();
    if descending {
        encoded.reverse();
    }
    encoded
}

/// The intervals one condition allows, or `None` when it gives no bounds: values holding
/// strings give none unless `strings_usable`. Intervals are ordered by `collation`.
fn condition_intervals(
    condition: &Condition,
    strings_usable: bool,
    collation: Option<&Collation>,
) -> Option<Vec<Interval>> {
    let usable = |v: &Bson| strings_usable || !holds_strings(v);
    let compare = |a: &Bson, b: &Bson| compare_values_with(a, b, collation);
    match condition {
        Condition::Eq(v) => point_value(v)
            .filter(usable)
            .map(|v| vec![Interval::point(v)]),
        Condition::In(values) => {
            let mut points = values
                .iter()
                .map(|v| point_value(v).filter(usable).map(Interval::point))
                .collect::<Option<Vec<_>>>()?;
            points.sort_by(|a, b| compare(&a.start, &b.start));
            points.dedup_by(|a, b| compare(&a.start, &b.start) == Ordering::Equal);
            Some(points)
        }
        Condition::Gt(v) | Condition::Gte(v) => {
            let (_, max) = type_bracket(v).filter(|_| usable(v))?;
            Some(vec![Interval {
                start: v.clone(),
                start_inclusive: matches!(condition, Condition::Gte(_)),
                end: max,
                end_inclusive: true,
            }])
        }
        Condition::Lt(v) | Condition::Lte(v) => {
            let (min, _) = type_bracket(v).filter(|_| usable(v))?;
            Some(vec![Interval {
                start: min,
                start_inclusive: true,
                end: v.clone(),
                end_inclusive: matches!(condition, Condition::Lte(_)),
            }])
        }
        Condition::Exists(false) => Some(vec![Interval::point(Bson::Null)]),
        Condition::Exists(true) | Condition::Other => None,
    }
}

/// The index key an equality to `v` looks up, when it is a single key: a regex matches
/// by pattern and an array also matches as an element, so neither is one key.
fn point_value(v: &Bson) -> Option<Bson> {
    match v {
        Bson::RegularExpression(_) | Bson::Array(_) => None,
        other => Some(other.clone()),
    }
}

/// The least and greatest values of `v`'s type (inclusive as a superset), for
/// comparisons, which only match values of the same type class.
fn type_bracket(v: &Bson) -> Option<(Bson, Bson)> {
    Some(match v {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            (Bson::Double(f64::NEG_INFINITY), Bson::Double(f64::INFINITY))
        }
        Bson::String(_) | Bson::Symbol(_) => {
            (Bson::String(String::new()), Bson::Document(Document::new()))
        }
        Bson::ObjectId(_) => (
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::ObjectId(ObjectId::from_bytes([0xFF; 12])),
        ),
        Bson::Boolean(_) => (Bson::Boolean(false), Bson::Boolean(true)),
        Bson::DateTime(_) => (
            Bson::DateTime(DateTime::from_millis(i64::MIN)),
            Bson::DateTime(DateTime::from_millis(i64::MAX)),
        ),
        Bson::Timestamp(_) => (
            Bson::Timestamp(Timestamp {
                time: 0,
                increment: 0,
            }),
            Bson::Timestamp(Timestamp {
                time: u32::MAX,
                increment: u32::MAX,
            }),
        ),
        _ => return None,
    })
}

fn holds_strings(value: &Bson) -> bool {
    match value {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(holds_strings),
        Bson::Array(items) => items.iter().any(holds_strings),
        _ => false,
    }
}

/// Point intervals of values, as point intervals of their hashes (in hash order).
fn hash_points(points: &[Interval], collation: Option<&Collation>) -> Vec<Interval> {
    let mut hashed: Vec<Interval> = points
        .iter()
        .map(|p| Interval::point(basalt_catalog::hashed_value(&p.start, collation)))
        .collect();
    hashed.sort_by(|a, b| compare_values_with(&a.start, &b.start, None));
    hashed.dedup();
    hashed
}

fn intersect_lists(a: &[Interval], b: &[Interval], collation: Option<&Collation>) -> Vec<Interval> {
    let mut out: Vec<Interval> = a
        .iter()
        .flat_map(|x| b.iter().filter_map(move |y| x.intersect(y, collation)))
        .collect();
    out.sort_by(|x, y| compare_values_with(&x.start, &y.start, collation));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::Predicates;
    use bson::doc;

    fn spec(key: Document, multikey: bool) -> IndexSpec {
        IndexSpec {
            id: 1,
            name: "i".into(),
            key,
            unique: false,
            sparse: false,
            multikey,
            expire_after_seconds: None,
            partial: None,
            collation: None,
            hidden: false,
            echoed: Document::new(),
        }
    }

    fn bounds(filter: Document, index: &IndexSpec) -> IndexBounds {
        let p = Predicates::parse(&filter);
        IndexBounds::for_index(index, |path| p.conditions(path), None)
    }

    #[test]
    fn explain_strings_follow_mongodb() {
        let b = bounds(
            doc! { "a": { "$gt": 5, "$lte": 9 }, "b": { "$in": [3, 1, 3] } },
            &spec(doc! { "a": 1, "b": -1, "c": 1 }, false),
        );
        assert_eq!(
            b.to_explain(false),
            doc! { "a": ["(5, 9]"], "b": ["[3, 3]", "[1, 1]"], "c": ["[MinKey, MaxKey]"] }
        );
        assert_eq!(
            b.to_explain(true),
            doc! { "a": ["[9, 5)"], "b": ["[1, 1]", "[3, 3]"], "c": ["[MaxKey, MinKey]"] }
        );
        let multikey = bounds(
            doc! { "a": { "$gt": 5, "$lte": 9 } },
            &spec(doc! { "a": 1 }, true),
        );
        assert_eq!(multikey.to_explain(false), doc! { "a": ["(5, inf.0]"] });
        let strings = bounds(doc! { "a": { "$lt": "m" } }, &spec(doc! { "a": 1 }, false));
        assert_eq!(strings.to_explain(false), doc! { "a": ["[\"\", \"m\")"] });
    }

    #[test]
    fn hashed_fields_take_equalities_only() {
        let index = spec(doc! { "a": "hashed" }, false);
        let hash = |v: Bson| Interval::point(basalt_catalog::hashed_value(&v, None));
        let eq = bounds(doc! { "a": 5 }, &index);
        assert_eq!(eq.fields[0].2, vec![hash(Bson::Int32(5))]);
        let set = bounds(doc! { "a": { "$in": [1, 1.0, 2] } }, &index);
        assert_eq!(set.fields[0].2.len(), 2);
        assert!(!bounds(doc! { "a": { "$gt": 5 } }, &index).leading_field_bounded());
    }

    #[test]
    fn contradictions_are_empty_and_null_is_a_point() {
        let index = spec(doc! { "a": 1 }, false);
        assert!(bounds(doc! { "a": { "$gt": 5, "$lt": 1 } }, &index).is_empty());
        let null = bounds(doc! { "a": null }, &index);
        assert!(null.leading_field_admits_null());
        assert!(!bounds(doc! { "a": { "$regex": "x" } }, &index).leading_field_bounded());
    }

    fn encode(values: &[(Bson, bool)]) -> Vec<u8> {
        let parts: Vec<(&Bson, bool)> = values.iter().map(|(v, d)| (v, *d)).collect();
        basalt_value::key_string::encode_key(&parts)
    }

    #[test]
    fn ranges_expand_points_and_check_later_fields() {
        let index = spec(doc! { "a": 1, "b": 1, "c": -1 }, false);
        let b = bounds(
            doc! { "a": { "$in": [1, 2] }, "b": { "$gte": 10 }, "c": 7 },
            &index,
        );
        let (ranges, filter) = b.key_ranges();
        assert_eq!(ranges.len(), 2);
        let below = bounds(doc! { "a": { "$lt": 5 } }, &index).key_ranges().0;
        assert!(below[0].is_past_end(&encode(&[(Bson::Int32(5), false)])));
        assert!(!below[0].is_past_end(&encode(&[(Bson::Int32(4), false)])));
        assert!(ranges[0].start < ranges[1].start);
        let key = |a: i32, b: i32, c: i32| {
            encode(&[
                (Bson::Int32(a), false),
                (Bson::Int32(b), false),
                (Bson::Int32(c), true),
            ])
        };
        assert_eq!(filter.check(&key(1, 12, 7), false), KeyCheck::InBounds);
        // c is descending: 9 comes before 7 in key order, so seek forward to c = 7.
        let head = encode(&[(Bson::Int32(1), false), (Bson::Int32(12), false)]);
        let seven = encode(&[(Bson::Int32(7), true)]);
        assert_eq!(
            filter.check(&key(1, 12, 9), false),
            KeyCheck::SeekAfter([head.as_slice(), &seven].concat())
        );
        assert_eq!(
            filter.check(&key(1, 12, 3), false),
            KeyCheck::SeekAfter([head.as_slice(), &[0xFF]].concat())
        );
        // Backward, the same keys seek down: c = 3 is below [7, 7] in value but above it
        // in key order, so past the end of 7's keys; c = 9 is below every interval.
        let seven_end = basalt_storage::prefix_upper_bound(&[head.as_slice(), &seven].concat());
        assert_eq!(filter.check(&key(1, 12, 7), true), KeyCheck::InBounds);
        assert_eq!(
            filter.check(&key(1, 12, 3), true),
            KeyCheck::SeekBefore(seven_end.unwrap())
        );
        assert_eq!(
            filter.check(&key(1, 12, 9), true),
            KeyCheck::SeekBefore(head.clone())
        );
        assert!(ranges[0].is_before_start(&encode(&[(Bson::Int32(0), false)])));
        assert!(!ranges[0].is_before_start(&key(1, 10, 0)));
        assert!(ranges[0].is_past_end(&key(2, 0, 0)));
        assert!(!ranges[0].is_past_end(&key(1, 99, 0)));
        assert!(ranges[0]
            .common_prefix()
            .starts_with(&encode(&[(Bson::Int32(1), false)])));
    }
}
