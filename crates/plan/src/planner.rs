//! Chooses how to find a filter's documents: a collection scan or one index scan.
//!
//! Choice is by a cost heuristic rather than MongoDB's trial runs: the index whose bounds
//! pin the most leading fields to points wins (fewest keys examined for the matches),
//! then the one bounding the most fields (more rejected per key, before any fetch),
//! then a unique index pinned on every field (at most one document), then the shorter
//! key pattern. The choice is cached per query shape (`plan_cache`), as MongoDB's is.
//!
//! An index scan runs forward or backward: a sort opposite to the index's key order
//! reads it from its last key down, as MongoDB does, instead of sorting.
//!
//! Collations: an index answers a query's string conditions and provides its sort only
//! when both use the same collation (or neither); conditions on other values may use
//! any index (see `index_bounds`).

use crate::index_bounds::{IndexBounds, KeyFilter, KeyRange};
use crate::predicate::{Condition, Predicates};
use basalt_catalog::{IndexSpec, TEXT_KEY_FIELD, WILDCARD_PATH_FIELD};
use basalt_error::{Error, Result};
use basalt_value::Collation;
use bson::{doc, Bson, Document};
use std::cmp::Reverse;

/// How to find candidate documents.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    CollectionScan,
    IndexScan(Box<IndexScanPlan>),
    /// A top-level `$or` whose every branch has an index: the union of their scans,
    /// each document fetched once.
    Or(Vec<IndexScanPlan>),
}

/// A scan of one index over key ranges, fetching each document once.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexScanPlan {
    pub index: IndexSpec,
    pub bounds: IndexBounds,
    /// In ascending key order; a backward scan reads them last to first.
    pub ranges: Vec<KeyRange>,
    pub key_filter: KeyFilter,
    /// Whether the scan reads keys in descending order (a sort opposite to the index).
    pub backward: bool,
}

impl IndexScanPlan {
    pub(crate) fn new(index: &IndexSpec, bounds: IndexBounds) -> IndexScanPlan {
        let (ranges, key_filter) = if bounds.is_empty() {
            (Vec::new(), bounds.key_ranges().1)
        } else {
            bounds.key_ranges()
        };
        IndexScanPlan {
            index: index.clone(),
            bounds,
            ranges,
            key_filter,
            backward: false,
        }
    }

    /// Whether scanning this plan's ranges yields documents in `sort` order, and in
    /// which direction: `Some(false)` forward, `Some(true)` backward. It does when the
    /// sort fields are consecutive fields of the key pattern with all the same
    /// directions or all the opposite ones, every field before them is pinned to one
    /// value, and the index is not multikey (an array would appear at each of its
    /// elements).
    pub fn sort_direction(&self, sort: &Document) -> Option<bool> {
        let fields = &self.bounds.fields;
        let first = sort.keys().next()?;
        let start = fields.iter().position(|(path, _, _)| path == first)?;
        let pinned = fields[..start].iter().all(|(_, _, list)| {
            list.len() == 1 && list[0].is_point(self.bounds.collation.as_ref())
        });
        if self.index.multikey || !pinned || sort.len() > fields.len() - start {
            return None;
        }
        let mut flips =
            sort.iter()
                .zip(&fields[start..])
                .map(|((name, direction), (path, descending, _))| {
                    let sort_descending = basalt_value::as_f64(direction)? < 0.0;
                    (name == path).then_some(sort_descending != *descending)
                });
        let backward = flips.next()??;
        flips.all(|flip| flip == Some(backward)).then_some(backward)
    }

    /// Turns the scan to read in `sort` order for a query sorting strings by `collation`,
    /// when it can; says whether it did. Keys are in the order of the index's collation,
    /// so only a query with the same one can take it.
    pub(crate) fn serve_sort(&mut self, sort: &Document, collation: Option<&Collation>) -> bool {
        if self.index.collation.as_ref() != collation {
            return false;
        }
        match self.sort_direction(sort) {
            Some(backward) => {
                self.backward = backward;
                true
            }
            None => false,
        }
    }

    /// The IXSCAN stage of explain; an index with a collation shows it after its name,
    /// as MongoDB does.
    pub fn to_explain(&self) -> Document {
        let mut stage = doc! {
            "stage": "IXSCAN",
            "keyPattern": self.index.key.clone(),
            "indexName": self.index.name.clone(),
        };
        if let Some(collation) = &self.index.collation {
            stage.insert("collation", collation.spec().clone());
        }
        stage.extend(doc! {
            "isMultiKey": self.index.multikey,
            "isUnique": self.index.unique,
            "isSparse": self.index.sparse,
            "isPartial": self.index.partial.is_some(),
            "indexVersion": 2,
            "direction": if self.backward { "backward" } else { "forward" },
            "indexBounds": self.bounds.to_explain(self.backward),
        });
        stage
    }
}

impl Plan {
    /// The plan as explain's `winningPlan` shows it: COLLSCAN, or FETCH over IXSCAN (or
    /// over an OR of IXSCANs), with `filter` where documents are re-checked.
    pub fn to_explain(&self, filter: &Document) -> Document {
        match self {
            Plan::CollectionScan => {
                let mut stage = doc! { "stage": "COLLSCAN" };
                if !filter.is_empty() {
                    stage.insert("filter", filter.clone());
                }
                stage.insert("direction", "forward");
                stage
            }
            Plan::IndexScan(_) | Plan::Or(_) => {
                let mut stage = doc! { "stage": "FETCH" };
                if !filter.is_empty() {
                    stage.insert("filter", filter.clone());
                }
                stage.insert("inputStage", self.scan_stage());
                stage
            }
        }
    }

    /// The stage under FETCH: the IXSCAN, or the OR of the branches' IXSCANs.
    pub fn scan_stage(&self) -> Document {
        match self {
            Plan::CollectionScan => doc! {},
            Plan::IndexScan(scan) => scan.to_explain(),
            Plan::Or(scans) => doc! {
                "stage": "OR",
                "inputStages": scans.iter().map(|s| Bson::Document(s.to_explain())).collect::<Vec<_>>(),
            },
        }
    }
}

/// How good an index's bounds are; greater is better, compared field by field in
/// this order (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Score {
    points: usize,
    bounded: usize,
    unique_point: bool,
    fewer_fields: Reverse<usize>,
}

/// The chosen plan and the others that were considered.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanChoice {
    pub winner: Plan,
    pub rejected: Vec<Plan>,
}

/// Plans `filter` over `indexes` for a query comparing strings by `collation` (binary
/// when `None`).
pub fn plan(indexes: &[IndexSpec], filter: &Document, collation: Option<&Collation>) -> PlanChoice {
    let predicates = Predicates::parse(filter);
    let mut candidates: Vec<(Score, IndexScanPlan)> = indexes
        .iter()
        .filter_map(|index| candidate(index, &predicates, collation))
        .collect();
    // Stable: among equals the earliest index (in creation order) wins.
    candidates.sort_by_key(|(score, _)| Reverse(*score));
    let mut plans = candidates
        .into_iter()
        .map(|(_, scan)| Plan::IndexScan(Box::new(scan)));
    match plans.next() {
        Some(winner) => PlanChoice {
            winner,
            rejected: plans.collect(),
        },
        None => PlanChoice {
            winner: or_plan(indexes, filter, collation).unwrap_or(Plan::CollectionScan),
            rejected: Vec::new(),
        },
    }
}

/// The scan of `index` for the predicates and its score, when the index can answer
/// them: its leading field is bounded, a sparse index is not asked for missing fields,
/// and a partial index holds every match.
pub(crate) fn candidate(
    index: &IndexSpec,
    predicates: &Predicates,
    collation: Option<&Collation>,
) -> Option<(Score, IndexScanPlan)> {
    if index.wildcard().is_some() {
        return wildcard_candidate(index, predicates, collation);
    }
    // A geo index's keys are cells, not values: it serves geo queries alone, planned
    // through its cells (`IndexSpec::geo_cells_index`).
    // A column store index has row groups, not keys: aggregations read it apart
    // (`basalt_server`'s column scan).
    if index.geo().is_some() || index.is_column_store() {
        return None;
    }
    // A text index holds only documents with words: it serves `$text` alone (whose
    // words the server turns into conditions on `_fts`).
    let text = index.key.contains_key(TEXT_KEY_FIELD);
    if text && predicates.conditions(TEXT_KEY_FIELD).is_empty() {
        return None;
    }
    let bounds = IndexBounds::for_index(index, |path| predicates.conditions(path), collation);
    let usable = bounds.leading_field_bounded()
        && !(index.sparse && bounds.leading_field_admits_null())
        && index
            .partial
            .as_ref()
            .is_none_or(|p| implies(predicates, &p.expression));
    usable.then(|| {
        let (points, bounded) = bounds.selectivity();
        let score = Score {
            points,
            bounded,
            unique_point: index.unique && points == index.key.len(),
            fewer_fields: Reverse(index.key.len()),
        };
        (score, IndexScanPlan::new(index, bounds))
    })
}

/// The best scan of a wildcard index for the predicates: on one path it covers, whose
/// conditions bound its values and cannot match a document without it (the index
/// holds only the values there are), scanned as the index for that path
/// (`IndexSpec::wildcard_for_path`: the path, then the value). Scored as a one-field
/// index on the path.
fn wildcard_candidate(
    index: &IndexSpec,
    predicates: &Predicates,
    collation: Option<&Collation>,
) -> Option<(Score, IndexScanPlan)> {
    let wildcard = index.wildcard()?;
    predicates
        .fields
        .iter()
        .filter(|(path, conditions)| {
            wildcard.covers(path)
                && !path.split('.').any(|part| part.parse::<usize>().is_ok())
                && conditions.iter().all(|condition| match condition {
                    Condition::Eq(value)
                    | Condition::Gt(value)
                    | Condition::Gte(value)
                    | Condition::Lt(value)
                    | Condition::Lte(value) => is_leaf(value),
                    Condition::In(values) => values.iter().all(is_leaf),
                    Condition::Exists(_) | Condition::Other => true,
                })
        })
        .filter_map(|(path, _)| {
            let scoped = index.wildcard_for_path(path);
            let on_path = [Condition::Eq(Bson::String(path.clone()))];
            let bounds = IndexBounds::for_index(
                &scoped,
                |field| {
                    if field == WILDCARD_PATH_FIELD {
                        &on_path
                    } else {
                        predicates.conditions(field)
                    }
                },
                collation,
            );
            let (_, _, values) = bounds.fields.get(1)?;
            let bounded = !(values.len() == 1 && values[0].is_all_values());
            let admits_null = values.iter().any(|i| i.contains(&Bson::Null, collation));
            if !bounded || admits_null {
                return None;
            }
            let (points, bounded) = bounds.selectivity();
            let score = Score {
                points: points.saturating_sub(1),
                bounded,
                unique_point: false,
                fewer_fields: Reverse(1),
            };
            Some((score, IndexScanPlan::new(&scoped, bounds)))
        })
        .max_by_key(|(score, _)| *score)
}

/// Whether a wildcard index holds `value` as one of its keys: a scalar (it holds the
/// leaves of documents, not their objects or arrays).
fn is_leaf(value: &Bson) -> bool {
    !matches!(value, Bson::Document(_) | Bson::Array(_) | Bson::Null)
}

/// Index union for a top-level `$or`: each branch (with the filter's other top-level
/// conditions) planned on its own; only when every branch gets an index, since one
/// branch without would need a collection scan anyway.
fn or_plan(
    indexes: &[IndexSpec],
    filter: &Document,
    collation: Option<&Collation>,
) -> Option<Plan> {
    let Some(Bson::Array(branches)) = filter.get("$or") else {
        return None;
    };
    let rest: Document = filter
        .iter()
        .filter(|(name, _)| name.as_str() != "$or")
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let mut scans = Vec::with_capacity(branches.len());
    for branch in branches {
        let Bson::Document(branch) = branch else {
            return None;
        };
        let combined = doc! { "$and": [rest.clone(), branch.clone()] };
        match plan(indexes, &combined, collation).winner {
            Plan::IndexScan(scan) => scans.push(*scan),
            Plan::CollectionScan | Plan::Or(_) => return None,
        }
    }
    (!scans.is_empty()).then_some(Plan::Or(scans))
}

/// The plan for a `hint`: an index named by name or key pattern, or `{$natural: ±1}`
/// for a collection scan. An unknown index is MongoDB's BadValue.
pub fn plan_hinted(
    indexes: &[IndexSpec],
    filter: &Document,
    collation: Option<&Collation>,
    hint: &Bson,
) -> Result<PlanChoice> {
    let winner = match resolve_hint(indexes, hint)? {
        // A column store index has no keys to scan: what it does not serve as a column
        // scan (an aggregation it covers, chosen by the server) reads the documents.
        None => Plan::CollectionScan,
        Some(index) if index.is_column_store() => Plan::CollectionScan,
        Some(index) => {
            let predicates = Predicates::parse(filter);
            let bounds =
                IndexBounds::for_index(index, |path| predicates.conditions(path), collation);
            Plan::IndexScan(Box::new(IndexScanPlan::new(index, bounds)))
        }
    };
    Ok(PlanChoice {
        winner,
        rejected: Vec::new(),
    })
}

/// Plans a query that may have a sort (and a hint): the usual choice, and whether the
/// winning index scan already returns documents in sort order, so no blocking sort is
/// needed. When no index serves the filter, a non-sparse index whose key order is the
/// sort is scanned whole rather than scanning the collection and sorting it. Only an
/// index with the query's collation provides its sort: strings sort in key order only
/// under the index's own collation.
pub fn plan_sorted(
    indexes: &[IndexSpec],
    filter: &Document,
    collation: Option<&Collation>,
    hint: Option<&Bson>,
    sort: Option<&Document>,
) -> Result<(PlanChoice, bool)> {
    let mut choice = match hint {
        Some(hint) => plan_hinted(indexes, filter, collation, hint)?,
        None => plan(indexes, filter, collation),
    };
    let Some(sort) = sort.filter(|s| !s.is_empty()) else {
        return Ok((choice, false));
    };
    let points = |plan: &Plan| match plan {
        Plan::IndexScan(scan) => Some(scan.bounds.selectivity().0),
        Plan::CollectionScan | Plan::Or(_) => None,
    };
    let provides = |plan: &Plan| {
        matches!(plan, Plan::IndexScan(scan)
            if scan.index.collation.as_ref() == collation && scan.sort_direction(sort).is_some())
    };
    if let Plan::IndexScan(scan) = &mut choice.winner {
        if scan.serve_sort(sort, collation) {
            return Ok((choice, true));
        }
    }
    // An index pinning as many leading fields to points examines about as many keys,
    // and saves the blocking sort.
    let winner_points = points(&choice.winner);
    if let Some(position) = choice
        .rejected
        .iter()
        .position(|p| provides(p) && points(p) >= winner_points)
    {
        let mut ordered = choice.rejected.remove(position);
        if let Plan::IndexScan(scan) = &mut ordered {
            scan.serve_sort(sort, collation);
        }
        let previous = std::mem::replace(&mut choice.winner, ordered);
        choice.rejected.insert(0, previous);
        return Ok((choice, true));
    }
    if hint.is_none() && choice.winner == Plan::CollectionScan {
        if let Some(scan) = whole_index_in_order(indexes, sort, collation) {
            let collection_scan =
                std::mem::replace(&mut choice.winner, Plan::IndexScan(Box::new(scan)));
            choice.rejected.push(collection_scan);
            return Ok((choice, true));
        }
    }
    Ok((choice, false))
}

/// A whole-index scan returning every document in `sort` order (strings by
/// `collation`), from the first index (neither sparse nor partial, so it holds every
/// document) whose key order is the sort or its reverse.
pub(crate) fn whole_index_in_order(
    indexes: &[IndexSpec],
    sort: &Document,
    collation: Option<&Collation>,
) -> Option<IndexScanPlan> {
    indexes
        .iter()
        .filter(|index| {
            !index.sparse && index.partial.is_none() && !index.key.contains_key(TEXT_KEY_FIELD)
        })
        .map(|index| IndexScanPlan::new(index, IndexBounds::whole_index(index)))
        .find_map(|mut scan| scan.serve_sort(sort, collation).then_some(scan))
}

/// Whether every document matching the query matches a partial index's filter, so the
/// index holds all of the query's matches. Judged conservatively: each top-level
/// condition of the filter must appear in the query as it is, except that `$exists: true`
/// also follows from an equality to a value other than null.
fn implies(query: &Predicates, partial_filter: &Document) -> bool {
    if partial_filter
        .keys()
        .any(|k| k.starts_with('$') && k != "$and")
    {
        return false;
    }
    Predicates::parse(partial_filter)
        .fields
        .iter()
        .all(|(path, needed)| {
            let present = query.conditions(path);
            needed.iter().all(|condition| match condition {
                Condition::Other => false,
                Condition::Exists(true) => present.iter().any(|c| {
                    matches!(c, Condition::Exists(true))
                        || matches!(c, Condition::Eq(v) if !matches!(v, Bson::Null | Bson::Undefined))
                }),
                other => present.contains(other),
            })
        })
}

/// The index a hint names, or `None` for `{$natural: ...}`.
pub fn resolve_hint<'a>(indexes: &'a [IndexSpec], hint: &Bson) -> Result<Option<&'a IndexSpec>> {
    let found = match hint {
        Bson::String(name) => indexes.iter().find(|i| &i.name == name),
        Bson::Document(d) if d.len() == 1 && d.contains_key("$natural") => {
            let direction = d.get("$natural").and_then(basalt_value::as_f64);
            return match direction {
                Some(direction) if direction == 1.0 || direction == -1.0 => Ok(None),
                _ => Err(Error::bad_value("$natural hint must be 1 or -1")),
            };
        }
        Bson::Document(key) => indexes.iter().find(|i| i.has_key_pattern(key)),
        _ => return Err(Error::failed_to_parse("hint must be a string or an object")),
    };
    found
        .map(Some)
        .ok_or_else(|| Error::bad_value("hint provided does not correspond to an existing index"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, key: Document, unique: bool) -> IndexSpec {
        IndexSpec {
            id: 1,
            name: name.into(),
            key,
            unique,
            sparse: false,
            multikey: false,
            expire_after_seconds: None,
            partial: None,
            collation: None,
            hidden: false,
            echoed: Document::new(),
        }
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![
            spec("_id_", doc! { "_id": 1 }, true),
            spec("a_1", doc! { "a": 1 }, false),
            spec("a_1_b_1", doc! { "a": 1, "b": 1 }, false),
            spec("b_1", doc! { "b": 1 }, false),
        ]
    }

    fn winner_name(choice: &PlanChoice) -> Option<&str> {
        match &choice.winner {
            Plan::IndexScan(scan) => Some(scan.index.name.as_str()),
            Plan::CollectionScan | Plan::Or(_) => None,
        }
    }

    #[test]
    fn picks_the_most_pinned_index() {
        let all = indexes();
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": 1, "b": 2 }, None)),
            Some("a_1_b_1")
        );
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": 1 }, None)),
            Some("a_1")
        );
        assert_eq!(
            winner_name(&plan(&all, &doc! { "b": { "$gt": 1 } }, None)),
            Some("b_1")
        );
        assert_eq!(
            winner_name(&plan(&all, &doc! { "_id": 3, "a": 1 }, None)),
            Some("_id_")
        );
        assert_eq!(winner_name(&plan(&all, &doc! { "c": 1 }, None)), None);
        let choice = plan(&all, &doc! { "a": 1, "b": 2 }, None);
        assert_eq!(choice.rejected.len(), 2);
    }

    #[test]
    fn or_branches_with_indexes_become_a_union() {
        let all = indexes();
        let union = plan(
            &all,
            &doc! { "$or": [{ "a": 1 }, { "b": { "$gt": 3 } }] },
            None,
        );
        let Plan::Or(scans) = &union.winner else {
            panic!("expected an OR plan, got {:?}", union.winner);
        };
        let names: Vec<&str> = scans.iter().map(|s| s.index.name.as_str()).collect();
        assert_eq!(names, ["a_1", "b_1"]);
        let partly = plan(&all, &doc! { "$or": [{ "a": 1 }, { "c": 3 }] }, None);
        assert_eq!(partly.winner, Plan::CollectionScan);
    }

    fn collation(spec: Document) -> Collation {
        Collation::parse(&spec).unwrap().unwrap()
    }

    #[test]
    fn collation_keeps_string_conditions_off_indexes() {
        let all = indexes();
        let english = collation(doc! { "locale": "en" });
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": "x" }, Some(&english))),
            None
        );
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": 5 }, Some(&english))),
            Some("a_1")
        );
    }

    /// `a_1` binary, `a_ci` case-insensitive, both on `a`.
    fn binary_and_collated() -> (Vec<IndexSpec>, Collation) {
        let case_insensitive = collation(doc! { "locale": "en", "strength": 2 });
        let mut collated = spec("a_ci", doc! { "a": 1 }, false);
        collated.collation = Some(case_insensitive.clone());
        (
            vec![spec("a_1", doc! { "a": 1 }, false), collated],
            case_insensitive,
        )
    }

    #[test]
    fn string_bounds_need_the_index_collation() {
        let (all, case_insensitive) = binary_and_collated();
        let ci = Some(&case_insensitive);
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": "x" }, ci)),
            Some("a_ci")
        );
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": "x" }, None)),
            Some("a_1")
        );
        let other = collation(doc! { "locale": "fr" });
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": "x" }, Some(&other))),
            None
        );
        // Numbers bound every index, whatever the collations.
        let numbers = plan(&all, &doc! { "a": { "$gt": 5 } }, Some(&other));
        assert_eq!(winner_name(&numbers), Some("a_1"));
        assert_eq!(numbers.rejected.len(), 1);
        // Strings the collation equates are one point; ranges intersect under it.
        let Plan::IndexScan(scan) = plan(&all, &doc! { "a": { "$in": ["abc", "ABC"] } }, ci).winner
        else {
            panic!("expected an index scan");
        };
        assert_eq!(scan.ranges.len(), 1);
        let explained = scan.to_explain();
        assert_eq!(
            explained
                .get_document("collation")
                .unwrap()
                .get_i32("strength")
                .unwrap(),
            2
        );
        let shown = explained
            .get_document("indexBounds")
            .unwrap()
            .get_array("a")
            .unwrap();
        assert!(
            matches!(&shown[0], Bson::String(s) if s.starts_with("[CollationKey(0x")),
            "{shown:?}"
        );
        // Ranges intersect under the collation: ("b", "C") is empty only in binary order.
        let range = doc! { "a": { "$gt": "b", "$lt": "C" } };
        let bounds_empty =
            |collation: Option<&Collation>| match plan(&all, &range, collation).winner {
                Plan::IndexScan(scan) => scan.bounds.is_empty(),
                other => panic!("expected an index scan, got {other:?}"),
            };
        assert!(!bounds_empty(ci));
        assert!(bounds_empty(None));
    }

    #[test]
    fn only_an_index_with_the_query_collation_provides_its_sort() {
        let (all, case_insensitive) = binary_and_collated();
        let sort = doc! { "a": 1 };
        let sorted = |collation: Option<&Collation>| {
            let (choice, provided) =
                plan_sorted(&all, &doc! {}, collation, None, Some(&sort)).unwrap();
            (winner_name(&choice).map(str::to_string), provided)
        };
        assert_eq!(sorted(Some(&case_insensitive)), (Some("a_ci".into()), true));
        assert_eq!(sorted(None), (Some("a_1".into()), true));
        assert_eq!(
            sorted(Some(&collation(doc! { "locale": "fr" }))),
            (None, false)
        );
        // A number range may use the collated index, but not for a binary sort.
        let (choice, provided) = plan_sorted(
            &all[1..],
            &doc! { "a": { "$gt": 1 } },
            None,
            None,
            Some(&sort),
        )
        .unwrap();
        assert_eq!((winner_name(&choice), provided), (Some("a_ci"), false));
    }

    #[test]
    fn sparse_indexes_cannot_answer_null() {
        let mut sparse = spec("a_1", doc! { "a": 1 }, false);
        sparse.sparse = true;
        let all = vec![sparse];
        assert_eq!(winner_name(&plan(&all, &doc! { "a": null }, None)), None);
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": 1 }, None)),
            Some("a_1")
        );
    }

    #[test]
    fn indexes_provide_sorts_in_their_key_order() {
        let all = indexes();
        let sorted = |filter: Document, sort: Document| {
            let (choice, provided) = plan_sorted(&all, &filter, None, None, Some(&sort)).unwrap();
            (winner_name(&choice).map(str::to_string), provided)
        };
        assert_eq!(
            sorted(doc! { "a": 1 }, doc! { "b": 1 }),
            (Some("a_1_b_1".into()), true)
        );
        assert_eq!(
            sorted(doc! { "a": 1, "b": 2 }, doc! { "b": 1 }),
            (Some("a_1_b_1".into()), true)
        );
        assert_eq!(
            sorted(doc! { "a": { "$gt": 1 } }, doc! { "a": 1 }),
            (Some("a_1".into()), true)
        );
        assert_eq!(sorted(doc! {}, doc! { "b": 1 }), (Some("b_1".into()), true));
        assert_eq!(
            sorted(doc! {}, doc! { "b": -1 }),
            (Some("b_1".into()), true)
        );
        assert_eq!(
            sorted(doc! { "a": 1 }, doc! { "b": -1 }),
            (Some("a_1_b_1".into()), true)
        );
        assert_eq!(
            sorted(doc! { "a": 1 }, doc! { "b": 1, "a": 1 }),
            (Some("a_1".into()), false)
        );
        assert_eq!(
            sorted(doc! { "a": { "$in": [1, 2] } }, doc! { "a": 1, "b": 1 }),
            (Some("a_1_b_1".into()), true)
        );
        assert_eq!(
            sorted(doc! { "a": 1 }, doc! { "c": 1 }),
            (Some("a_1".into()), false)
        );
    }

    #[test]
    fn sorts_against_the_key_order_scan_backward() {
        let all = vec![spec("a_1_b_-1", doc! { "a": 1, "b": -1 }, false)];
        let direction = |sort: Document| {
            let (choice, provided) =
                plan_sorted(&all, &doc! { "a": { "$gt": 1 } }, None, None, Some(&sort)).unwrap();
            match choice.winner {
                Plan::IndexScan(scan) if provided => Some(scan.to_explain()),
                _ => None,
            }
        };
        let backward = direction(doc! { "a": -1, "b": 1 }).unwrap();
        assert_eq!(backward.get_str("direction").unwrap(), "backward");
        assert_eq!(
            backward.get_document("indexBounds").unwrap(),
            &doc! { "a": ["[inf.0, 1)"], "b": ["[MinKey, MaxKey]"] }
        );
        let forward = direction(doc! { "a": 1, "b": -1 }).unwrap();
        assert_eq!(forward.get_str("direction").unwrap(), "forward");
        assert_eq!(direction(doc! { "a": 1, "b": 1 }), None);
        assert_eq!(
            direction(doc! { "a": -1 })
                .unwrap()
                .get_str("direction")
                .unwrap(),
            "backward"
        );
    }

    #[test]
    fn partial_indexes_serve_queries_that_imply_their_filter() {
        let mut partial = spec("a_1", doc! { "a": 1 }, false);
        partial.partial = Some(
            basalt_catalog::PartialFilter::new(
                doc! { "b": { "$gt": 5 }, "c": { "$exists": true } },
            )
            .unwrap(),
        );
        let all = vec![partial];
        let implied = doc! { "a": 1, "b": { "$gt": 5 }, "c": 3 };
        assert_eq!(winner_name(&plan(&all, &implied, None)), Some("a_1"));
        assert_eq!(
            winner_name(&plan(
                &all,
                &doc! { "a": 1, "b": { "$gt": 6 }, "c": 3 },
                None
            )),
            None
        );
        assert_eq!(
            winner_name(&plan(&all, &doc! { "a": 1, "b": { "$gt": 5 } }, None)),
            None
        );
    }

    #[test]
    fn hints_by_name_key_or_natural() {
        let all = indexes();
        let f = doc! {};
        let by_key = plan_hinted(&all, &f, None, &Bson::Document(doc! { "b": 1.0 })).unwrap();
        assert_eq!(winner_name(&by_key), Some("b_1"));
        let by_name = plan_hinted(&all, &f, None, &Bson::String("a_1".into())).unwrap();
        assert_eq!(winner_name(&by_name), Some("a_1"));
        let natural = plan_hinted(&all, &f, None, &Bson::Document(doc! { "$natural": 1 })).unwrap();
        assert_eq!(natural.winner, Plan::CollectionScan);
        let err = plan_hinted(&all, &f, None, &Bson::String("nope".into())).unwrap_err();
        assert_eq!(err.code, basalt_error::ErrorCode::BAD_VALUE);
        for direction in [
            Bson::Int32(0),
            Bson::Double(f64::NAN),
            Bson::String("x".into()),
        ] {
            let hint = Bson::Document(doc! { "$natural": direction });
            let err = plan_hinted(&all, &f, None, &hint).unwrap_err();
            assert_eq!(err.code, basalt_error::ErrorCode::BAD_VALUE);
        }
    }
}
