//! The query filter matcher: parses a filter document once into an expression tree and
//! tests documents against it.
//!
//! Top-level parsing lives here (fields, `$and`/`$or`/`$nor`, `$expr`, `$comment`); what a
//! filter says about one path is parsed and evaluated by [`crate::operators`]. Besides a
//! yes/no answer, matching reports the array position a positional `$` projection or
//! update refers to: the index, in the first array a matching path went through, of the
//! element that matched.
//!
//! `$expr` embeds an aggregation expression (`basalt_expr`), which sees the command's `let`
//! variables and `$$NOW` and, unlike the rest of a filter, can fail while a document is
//! tested (`{$add: ["$a", "text"]}`): the first such error is the outcome of the match.

use crate::operators::{
    parse_logical, parse_path_condition, GeoTest, JsonSchema, NearQuery, Predicate, ValueMatch,
};
use crate::raw_filter::RawFilter;
use crate::text::{TextIndex, TextQuery};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{truthy, Expression, FieldSet, ParseContext, Scope, Variables};
use basalt_js::WhereClause;
use basalt_value::{Collation, FieldPath};
use bson::{Bson, Document};
use std::cell::Cell;
use std::sync::Arc;

/// A parsed query filter.
#[derive(Clone, Debug)]
pub struct Matcher {
    root: MatchExpr,
    /// The values `$expr` sees: `$$NOW` and the command's `let` variables.
    vars: Variables,
    /// The collation strings compare under; `None` is binary comparison.
    collation: Option<Collation>,
    /// The filter's simple comparisons, tested on stored documents before decoding.
    raw: RawFilter,
    /// The collection's text index, which a `$text` condition searches under.
    text_index: Option<Arc<TextIndex>>,
}

/// What a successful match found out about the document.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Matched {
    /// The position a positional `$` refers to, when the filter matched inside an array.
    pub array_position: Option<usize>,
}

impl Matcher {
    /// Parses a filter, failing with MongoDB's error for malformed ones. An `$expr` in it
    /// sees no `let` variables.
    pub fn new(filter: &Document) -> Result<Matcher> {
        Matcher::with_scope(filter, &Scope::new())
    }

    /// Parses a filter whose `$expr` sees the variables of the command it belongs to.
    pub fn with_scope(filter: &Document, scope: &Scope) -> Result<Matcher> {
        check_text_placement(filter, true)?;
        check_near_placement(filter)?;
        Ok(Matcher {
            root: parse_filter(filter, FilterLevel::Top(Some(&scope.names)))?,
            vars: scope.values.clone(),
            collation: None,
            raw: RawFilter::new(filter),
            text_index: None,
        })
    }

    /// The `$text` condition of the filter, if it has one.
    pub fn text_query(&self) -> Option<&TextQuery> {
        self.root.text_query()
    }

    /// The `$near`/`$nearSphere` condition of the filter and its path, if it has one.
    pub fn near(&self) -> Option<(&str, &NearQuery)> {
        self.root.near()
    }

    /// The same filter with `$text` searching under `index` (the collection's text
    /// index; without one, a `$text` condition fails with IndexNotFound).
    pub fn with_text_index(mut self, index: Option<Arc<TextIndex>>) -> Matcher {
        self.text_index = index;
        self
    }

    /// Whether a text index is attached (see [`Matcher::with_text_index`]).
    pub fn has_text_index(&self) -> bool {
        self.text_index.is_some()
    }

    /// The text score of a matching document, when the filter has `$text`.
    pub fn text_score(&self, doc: &Document) -> Option<f64> {
        self.text_query()?.score(self.text_index.as_deref()?, doc)
    }

    /// The same filter with its strings compared under `collation` (the command's
    /// `collation` option; `None` for binary comparison). Regexes are not affected.
    pub fn with_collation(mut self, collation: Option<&Collation>) -> Matcher {
        self.collation = collation.cloned();
        // `$expr` compares strings under it too.
        self.vars = self.vars.with_collation(collation);
        if self.collation.is_some() {
            self.raw = self.raw.without_strings();
        }
        self
    }

    /// Whether the filter has no condition (every document matches).
    pub fn is_empty(&self) -> bool {
        matches!(&self.root, MatchExpr::And(children) if children.is_empty())
            || matches!(self.root, MatchExpr::Always(true))
    }

    /// True when the stored document `raw` certainly does not match, found without
    /// decoding it; false says nothing (see [`RawFilter`]).
    pub fn rejects_raw(&self, raw: &bson::RawDocument) -> bool {
        self.raw.rejects(raw)
    }

    /// Parses a filter of an update's array filters or `$pull`, where MongoDB refuses
    /// `$expr`.
    pub(crate) fn without_expr(filter: &Document) -> Result<Matcher> {
        Ok(Matcher {
            root: parse_filter(filter, FilterLevel::Top(None))?,
            vars: Variables::new(),
            collation: None,
            raw: RawFilter::default(),
            text_index: None,
        })
    }

    /// Whether `doc` matches, for callers that cannot report errors: an `$expr` that fails
    /// to evaluate does not match. Filters without `$expr` cannot fail.
    pub fn matches(&self, doc: &Document) -> bool {
        self.try_matches(doc).unwrap_or(false)
    }

    /// Whether `doc` matches, or the error an `$expr` raised on it.
    pub fn try_matches(&self, doc: &Document) -> Result<bool> {
        Ok(self.match_details(doc)?.is_some())
    }

    /// Like [`Matcher::try_matches`], also reporting the matched array position.
    pub fn match_details(&self, doc: &Document) -> Result<Option<Matched>> {
        let mut env = MatchEnv::new(&self.vars, self.collation.as_ref());
        env.text_index = self.text_index.as_deref();
        let mut array_position = None;
        let matched = self.root.matches(doc, &env, &mut array_position);
        match env.error.take() {
            Some(e) => Err(e),
            None => Ok(matched.then_some(Matched { array_position })),
        }
    }

    /// Whether some condition of the filter is on a path whose first component is
    /// `field` (a positional projection `a.$` needs one on `a`).
    pub fn constrains_field(&self, field: &str) -> bool {
        self.root.constrains_field(field)
    }

    /// The top-level fields the filter reads, or `None` when it reads the whole document
    /// (`$jsonSchema`, an `$expr` on `$$ROOT`, a `$where` that passes `this` on). Matching a document that holds only these
    /// fields gives the same answer as matching the whole document, so a scan need not
    /// decode the rest of a record it will reject.
    pub fn top_level_fields(&self) -> Option<Vec<String>> {
        let mut fields = Vec::new();
        self.root
            .collect_top_level_fields(&mut fields)
            .then_some(fields)
    }
}

/// Where a filter is parsed, which decides whether `$expr` may appear in it.
#[derive(Clone, Copy)]
pub(crate) enum FilterLevel<'a> {
    /// A whole filter, or a branch of its `$and`/`$or`/`$nor`: `$expr` is parsed with
    /// these variable names in scope, or refused where there are none (array filters and
    /// `$pull`).
    Top(Option<&'a ParseContext>),
    /// The filter of an `$elemMatch`, applied to array elements rather than the document.
    Element,
}

/// What testing one document needs besides the document: the values `$expr` sees, the
/// collation strings compare under, and the first error an `$expr` raised (the test goes
/// on, counting it as no match, and the [`Matcher`] reports the error).
pub(crate) struct MatchEnv<'a> {
    vars: &'a Variables,
    pub(crate) collation: Option<&'a Collation>,
    text_index: Option<&'a TextIndex>,
    error: Cell<Option<Error>>,
}

impl<'a> MatchEnv<'a> {
    fn new(vars: &'a Variables, collation: Option<&'a Collation>) -> MatchEnv<'a> {
        MatchEnv {
            vars,
            collation,
            text_index: None,
            error: Cell::new(None),
        }
    }

    pub(crate) fn fail(&self, error: Error) {
        let first = self.error.take().unwrap_or(error);
        self.error.set(Some(first));
    }
}

/// A parsed filter.
#[derive(Clone, Debug)]
pub(crate) enum MatchExpr {
    And(Vec<MatchExpr>),
    Or(Vec<MatchExpr>),
    Nor(Vec<MatchExpr>),
    Path(FieldPath, ValueMatch),
    /// `$expr`: the document matches when the expression is truthy; with the fields the
    /// expression reads.
    Expr(Arc<Expression>, Arc<FieldSet>),
    /// `$jsonSchema`: the document matches when it is valid under the schema.
    Schema(Arc<JsonSchema>),
    /// `$where`: the document matches when the JavaScript predicate is truthy.
    Where(WhereClause),
    /// `$text`: the document matches the search under the collection's text index.
    Text(Arc<TextQuery>),
    Always(bool),
}

impl MatchExpr {
    /// Adds the first component of every path this expression reads; false when it reads
    /// the whole document.
    fn collect_top_level_fields(&self, out: &mut Vec<String>) -> bool {
        match self {
            MatchExpr::And(children) | MatchExpr::Or(children) | MatchExpr::Nor(children) => {
                children.iter().all(|c| c.collect_top_level_fields(out))
            }
            MatchExpr::Path(path, _) => {
                if let Some(first) = path.components().next() {
                    if !out.iter().any(|f| f == first) {
                        out.push(first.to_string());
                    }
                }
                true
            }
            MatchExpr::Expr(_, reads) => add_fields(out, reads.fields()),
            // A script that reads its document only as `this.name` sees only those.
            MatchExpr::Where(clause) => add_fields(out, clause.fields_read()),
            MatchExpr::Schema(_) | MatchExpr::Text(_) => false,
            MatchExpr::Always(_) => true,
        }
    }

    /// The `$text` condition, at the top or in a top-level `$and` (where it may be).
    fn text_query(&self) -> Option<&TextQuery> {
        match self {
            MatchExpr::Text(query) => Some(query),
            MatchExpr::And(children) => children.iter().find_map(MatchExpr::text_query),
            _ => None,
        }
    }

    /// The `$near` condition, at the top or in a top-level `$and` (where it may be).
    fn near(&self) -> Option<(&str, &NearQuery)> {
        match self {
            MatchExpr::Path(path, ValueMatch::Leaf(Predicate::Geo(GeoTest::Near(query)))) => {
                Some((path.as_str(), query))
            }
            MatchExpr::And(children) => children.iter().find_map(MatchExpr::near),
            _ => None,
        }
    }

    /// Whether `doc` matches; a match inside an array records its position. As in
    /// MongoDB, branches of `$or` and `$nor` do not report positions.
    pub(crate) fn matches(
        &self,
        doc: &Document,
        env: &MatchEnv<'_>,
        position: &mut Option<usize>,
    ) -> bool {
        match self {
            MatchExpr::And(children) => children.iter().all(|c| c.matches(doc, env, position)),
            MatchExpr::Or(children) => children.iter().any(|c| c.matches(doc, env, &mut None)),
            MatchExpr::Nor(children) => !children.iter().any(|c| c.matches(doc, env, &mut None)),
            MatchExpr::Path(path, condition) => condition.matches_at(path, doc, env, position),
            MatchExpr::Expr(expression, _) => match expression.evaluate_ref(doc, env.vars) {
                Ok(value) => truthy(value.as_deref()),
                Err(e) => {
                    env.fail(e);
                    false
                }
            },
            MatchExpr::Schema(schema) => schema.validates_document(doc),
            MatchExpr::Where(clause) => clause.matches(doc).unwrap_or_else(|e| {
                env.fail(e);
                false
            }),
            MatchExpr::Text(query) => match env.text_index {
                Some(index) => query.matches(index, doc),
                None => {
                    env.fail(Error::new(
                        ErrorCode::INDEX_NOT_FOUND,
                        "text index required for $text query",
                    ));
                    false
                }
            },
            MatchExpr::Always(result) => *result,
        }
    }

    fn constrains_field(&self, field: &str) -> bool {
        match self {
            MatchExpr::And(children) | MatchExpr::Or(children) | MatchExpr::Nor(children) => {
                children.iter().any(|c| c.constrains_field(field))
            }
            MatchExpr::Path(path, _) => path.components().next() == Some(field),
            MatchExpr::Expr(..)
            | MatchExpr::Schema(_)
            | MatchExpr::Where(_)
            | MatchExpr::Text(_)
            | MatchExpr::Always(_) => false,
        }
    }
}

/// Adds `fields` to `out` once each; false when they are the whole document (`None`).
fn add_fields(out: &mut Vec<String>, fields: Option<&[String]>) -> bool {
    let Some(fields) = fields else {
        return false;
    };
    for field in fields {
        if !out.contains(field) {
            out.push(field.clone());
        }
    }
    true
}

/// Parses a filter document (top level, or nested in `$and` and friends).
pub(crate) fn parse_filter(filter: &Document, level: FilterLevel<'_>) -> Result<MatchExpr> {
    let mut children = Vec::with_capacity(filter.len());
    // JavaScript is the slowest test: it runs last, on what the rest let through.
    let mut where_clause = None;
    for (name, value) in filter {
        if let Some(operator) = name.strip_prefix('$') {
            match operator {
                "and" | "or" | "nor" => children.push(parse_logical(name, value, level)?),
                "expr" => children.push(parse_expr(value, level)?),
                "sampleRate" => children.push(parse_sample_rate(value, level)?),
                "comment" => {}
                "alwaysTrue" | "alwaysFalse" => {
                    if basalt_value::as_i64(value) != Some(1) {
                        return Err(Error::failed_to_parse(format!(
                            "{name} must be an integer value of 1"
                        )));
                    }
                    children.push(MatchExpr::Always(operator == "alwaysTrue"));
                }
                // DBRef fields are matched as ordinary fields.
                "ref" | "id" | "db" => children.push(MatchExpr::Path(
                    FieldPath::parse(name),
                    parse_path_condition(name, &equality_only(value))?,
                )),
                "jsonSchema" => children.push(MatchExpr::Schema(Arc::new(
                    JsonSchema::parse_operand(value)?,
                ))),
                "where" => where_clause = Some(MatchExpr::Where(WhereClause::parse(value)?)),
                "text" => match level {
                    FilterLevel::Top(_) => {
                        children.push(MatchExpr::Text(Arc::new(TextQuery::parse(value)?)))
                    }
                    FilterLevel::Element => return Err(text_not_allowed()),
                },
                _ => {
                    return Err(Error::bad_value(format!(
                        "unknown top level operator: {name}. If you have a field name that \
                         starts with a '$' symbol, consider using $getField or $setField."
                    )))
                }
            }
            continue;
        }
        children.push(MatchExpr::Path(
            FieldPath::parse(name),
            parse_path_condition(name, value)?,
        ));
    }
    children.extend(where_clause);
    Ok(if children.len() == 1 {
        children.remove(0)
    } else {
        MatchExpr::And(children)
    })
}

fn text_not_allowed() -> Error {
    Error::bad_value("$text is only allowed at the top level of a filter or in its $and")
}

/// `$text` may appear once, at the top of the filter or in a top-level `$and`.
fn check_text_placement(filter: &Document, allowed: bool) -> Result<()> {
    let mut count = 0;
    count_text(filter, allowed, &mut count)?;
    if count > 1 {
        return Err(Error::bad_value("Too many text expressions"));
    }
    Ok(())
}

fn count_text(filter: &Document, allowed: bool, count: &mut usize) -> Result<()> {
    for (name, value) in filter {
        match (name.as_str(), value) {
            ("$text", _) if !allowed => return Err(text_not_allowed()),
            ("$text", _) => *count += 1,
            (logical @ ("$and" | "$or" | "$nor"), Bson::Array(branches)) => {
                for branch in branches.iter().filter_map(Bson::as_document) {
                    count_text(branch, allowed && logical == "$and", count)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `$near` and `$nearSphere` may appear once, at the top of the filter or in its
/// `$and`s, not beside `$text`.
fn check_near_placement(filter: &Document) -> Result<()> {
    let mut count = 0;
    count_near(filter, true, &mut count)?;
    if count > 1 {
        return Err(Error::bad_value("Too many geoNear expressions"));
    }
    if count == 1 && filter.contains_key("$text") {
        return Err(Error::bad_value(
            "text and geoNear not allowed in same query",
        ));
    }
    Ok(())
}

fn count_near(filter: &Document, allowed: bool, count: &mut usize) -> Result<()> {
    let misplaced = || Error::bad_value("geoNear must be top-level expr");
    for (name, value) in filter {
        match (name.as_str(), value) {
            (logical @ ("$and" | "$or" | "$nor"), Bson::Array(branches)) => {
                for branch in branches.iter().filter_map(Bson::as_document) {
                    count_near(branch, allowed && logical == "$and", count)?;
                }
            }
            (_, Bson::Document(ops)) if !name.starts_with('$') => {
                if ops.contains_key("$near") || ops.contains_key("$nearSphere") {
                    if !allowed {
                        return Err(misplaced());
                    }
                    *count += usize::from(ops.contains_key("$near"))
                        + usize::from(ops.contains_key("$nearSphere"));
                }
                for (op, operand) in ops {
                    let nested = match (op.as_str(), operand) {
                        ("$not", Bson::Document(inner)) => Some(inner),
                        ("$elemMatch", Bson::Document(inner)) => Some(inner),
                        _ => None,
                    };
                    if let Some(inner) = nested {
                        let mut inner_count = 0;
                        let wrapped = bson::doc! { "x": Bson::Document(inner.clone()) };
                        count_near(&wrapped, true, &mut inner_count)?;
                        count_near(inner, true, &mut inner_count)?;
                        if inner_count > 0 {
                            return Err(misplaced());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn top_level_only(name: &str) -> Error {
    Error::bad_value(format!(
        "{name} can only be applied to the top-level document"
    ))
}

fn parse_expr(spec: &Bson, level: FilterLevel<'_>) -> Result<MatchExpr> {
    match level {
        FilterLevel::Element => Err(top_level_only("$expr")),
        FilterLevel::Top(None) => Err(Error::new(
            ErrorCode::QUERY_FEATURE_NOT_ALLOWED,
            "$expr is not allowed in this context",
        )),
        FilterLevel::Top(Some(names)) => {
            let mut reads = FieldSet::new();
            reads.add_expression(spec);
            Ok(MatchExpr::Expr(
                Arc::new(Expression::parse(spec, names)?),
                Arc::new(reads),
            ))
        }
    }
}

/// `$sampleRate: p` keeps each document with probability p: MongoDB's rewrite into
/// `{$expr: {$lt: [{$rand: {}}, p]}}`, with the certain cases decided here.
fn parse_sample_rate(rate: &Bson, level: FilterLevel<'_>) -> Result<MatchExpr> {
    if matches!(level, FilterLevel::Element) {
        return Err(top_level_only("$sampleRate"));
    }
    let p = match rate {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            basalt_value::as_f64(rate).unwrap_or(f64::NAN)
        }
        _ => {
            return Err(Error::bad_value(
                "argument to $sampleRate must be a numeric type",
            ))
        }
    };
    // Written so that NaN fails too.
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::bad_value(
            "numeric argument to $sampleRate must be in [0, 1]",
        ));
    }
    if p == 0.0 || p == 1.0 {
        return Ok(MatchExpr::Always(p == 1.0));
    }
    let draw = bson::bson!({"$lt": [{"$rand": {}}, p]});
    Ok(MatchExpr::Expr(
        Arc::new(Expression::parse(&draw, &ParseContext::new())?),
        Arc::new(FieldSet::new()),
    ))
}

/// A DBRef field's value is compared as is, even if it looks like an operator document.
fn equality_only(value: &Bson) -> Bson {
    match value {
        Bson::Document(_) => bson::bson!({ "$eq": value.clone() }),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn empty_filter_matches_everything() {
        assert!(Matcher::new(&doc! {}).unwrap().matches(&doc! {"a": 1}));
    }

    #[test]
    fn top_level_errors() {
        let err = Matcher::new(&doc! {"$foo": 1}).unwrap_err();
        assert_eq!(err.code, basalt_error::ErrorCode::BAD_VALUE);
        assert!(err.message.starts_with("unknown top level operator: $foo."));
        assert_eq!(
            Matcher::new(&doc! {"a": {"$where": "x"}})
                .unwrap_err()
                .message,
            "$where cannot be applied to a field"
        );
    }

    #[test]
    fn expr_compares_fields_of_the_document() {
        let m = Matcher::new(&doc! {"$expr": {"$gt": ["$a", "$b"]}}).unwrap();
        assert!(m.matches(&doc! {"a": 2, "b": 1}));
        assert!(!m.matches(&doc! {"a": 1, "b": 2}));
        let m = Matcher::new(&doc! {"x": 1, "$or": [{"$expr": "$flag"}, {"y": 1}]}).unwrap();
        assert!(m.matches(&doc! {"x": 1, "flag": true}));
        assert!(m.matches(&doc! {"x": 1, "y": 1}));
        assert!(!m.matches(&doc! {"x": 1, "flag": 0}));
        assert!(!m.matches(&doc! {"x": 2, "flag": true}));
    }

    #[test]
    fn expr_sees_let_variables_and_now() {
        let scope = Scope::with_let(&doc! {"id": 1, "limit": {"$add": [1, 2]}}).unwrap();
        let m = Matcher::with_scope(
            &doc! {"$expr": {"$and": [
                {"$eq": ["$_id", "$$id"]},
                {"$lt": ["$n", "$$limit"]},
                {"$lte": ["$at", "$$NOW"]},
            ]}},
            &scope,
        )
        .unwrap();
        let past = bson::DateTime::from_millis(0);
        assert!(m.matches(&doc! {"_id": 1, "n": 2, "at": past}));
        assert!(!m.matches(&doc! {"_id": 2, "n": 2, "at": past}));
        assert!(!m.matches(&doc! {"_id": 1, "n": 3, "at": past}));
        let e = Matcher::new(&doc! {"$expr": {"$eq": ["$_id", "$$id"]}}).unwrap_err();
        assert_eq!(e.code.0, 17276);
    }

    #[test]
    fn expr_errors_are_the_outcome_of_the_match() {
        let m = Matcher::new(&doc! {"$expr": {"$add": ["$a", 1]}}).unwrap();
        assert!(m.try_matches(&doc! {"a": 1}).unwrap());
        assert!(!m.try_matches(&doc! {"a": -1}).unwrap());
        let e = m.try_matches(&doc! {"a": "text"}).unwrap_err();
        assert_eq!(e.code.0, 14);
        assert!(m.match_details(&doc! {"a": "text"}).is_err());
        assert!(!m.matches(&doc! {"a": "text"}));
    }

    #[test]
    fn expr_is_refused_where_mongodb_refuses_it() {
        let e = Matcher::new(&doc! {"a": {"$elemMatch": {"$expr": true}}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BAD_VALUE);
        assert_eq!(
            e.message,
            "$expr can only be applied to the top-level document"
        );
        let e = Matcher::without_expr(&doc! {"$expr": true}).unwrap_err();
        assert_eq!(e.code, ErrorCode::QUERY_FEATURE_NOT_ALLOWED);
        assert_eq!(e.message, "$expr is not allowed in this context");
        let e = Matcher::without_expr(&doc! {"$and": [{"$expr": true}]}).unwrap_err();
        assert_eq!(e.code, ErrorCode::QUERY_FEATURE_NOT_ALLOWED);
        assert_eq!(
            Matcher::new(&doc! {"$expr": {"$bogus": 1}})
                .unwrap_err()
                .code
                .0,
            168
        );
    }

    #[test]
    fn sample_rate() {
        let all = Matcher::new(&doc! {"$sampleRate": 1}).unwrap();
        let none = Matcher::new(&doc! {"$sampleRate": 0.0}).unwrap();
        assert!(all.matches(&doc! {}) && !none.matches(&doc! {}));
        let half = Matcher::new(&doc! {"$sampleRate": 0.5}).unwrap();
        let kept = (0..1000).filter(|_| half.matches(&doc! {})).count();
        assert!((300..700).contains(&kept), "kept {kept} of 1000");
        let code = |rate: Bson| {
            Matcher::new(&doc! {"$sampleRate": rate})
                .unwrap_err()
                .message
        };
        assert_eq!(
            code(Bson::Double(1.5)),
            "numeric argument to $sampleRate must be in [0, 1]"
        );
        assert_eq!(
            code(Bson::Double(f64::NAN)),
            "numeric argument to $sampleRate must be in [0, 1]"
        );
        assert_eq!(
            code(Bson::String("x".into())),
            "argument to $sampleRate must be a numeric type"
        );
        assert_eq!(
            Matcher::new(&doc! {"a": {"$elemMatch": {"$sampleRate": 1}}})
                .unwrap_err()
                .message,
            "$sampleRate can only be applied to the top-level document"
        );
    }

    #[test]
    fn comment_is_ignored() {
        let m = Matcher::new(&doc! {"a": 1, "$comment": "why"}).unwrap();
        assert!(m.matches(&doc! {"a": 1}));
    }

    #[test]
    fn array_position_of_the_match() {
        let details = |filter: Document, doc: Document| {
            Matcher::new(&filter).unwrap().match_details(&doc).unwrap()
        };
        let at = |i| {
            Some(Matched {
                array_position: Some(i),
            })
        };
        assert_eq!(details(doc! {"a": 5}, doc! {"a": [1, 5]}), at(1));
        assert_eq!(
            details(doc! {"a.b": 5}, doc! {"a": [{"b": 1}, {"b": 5}]}),
            at(1)
        );
        assert_eq!(
            details(doc! {"a.b": 5}, doc! {"a": [{"b": [4]}, {"b": [6, 5]}]}),
            at(1)
        );
        assert_eq!(
            details(doc! {"a": {"$elemMatch": {"$gt": 2}}}, doc! {"a": [1, 3]}),
            at(1)
        );
        assert_eq!(
            details(doc! {"a": 5}, doc! {"a": 5}),
            Some(Matched::default())
        );
        assert_eq!(details(doc! {"a": 6}, doc! {"a": 5}), None);
        assert_eq!(
            details(
                doc! {"x": 1, "a": {"$gt": 2}},
                doc! {"x": 1, "a": [1, 2, 3]}
            ),
            at(2)
        );
    }

    #[test]
    fn top_level_fields_of_a_filter() {
        let m =
            Matcher::new(&doc! { "a.b": 1, "$or": [{ "c": 2 }, { "a": { "$gt": 0 } }] }).unwrap();
        assert_eq!(
            m.top_level_fields(),
            Some(vec!["a".to_string(), "c".to_string()])
        );
        let expr = Matcher::new(&doc! { "a": 1, "$expr": { "$gt": ["$b.c", 1] } }).unwrap();
        assert_eq!(
            expr.top_level_fields(),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        let whole = Matcher::new(&doc! { "a": 1, "$expr": { "$eq": ["$$ROOT", {}] } }).unwrap();
        assert_eq!(whole.top_level_fields(), None);
        let script = Matcher::new(&doc! { "a": 1, "$where": "this.b > obj.a" }).unwrap();
        assert_eq!(
            script.top_level_fields(),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        let passes_this_on = Matcher::new(&doc! { "$where": "check(this)" }).unwrap();
        assert_eq!(passes_this_on.top_level_fields(), None);
        assert_eq!(
            Matcher::new(&doc! {}).unwrap().top_level_fields(),
            Some(vec![])
        );
    }
}
