//! `$group`: one output document per distinct `_id` value, with accumulated fields.
//!
//! Groups are keyed by MongoDB's value comparison, so `1`, `1.0` and `NumberLong(1)`
//! fall into one group, and strings under the command's collation (at strength 2 "ABC"
//! and "abc" are one group, named by the first value seen); a missing `_id` value groups
//! as null. Output comes in `_id` order (MongoDB leaves it unspecified).
//!
//! The groups may hold 100 MB (MongoDB's `internalDocumentSourceGroupMaxMemoryBytes`),
//! and no more than the server's memory budget has room for. Beyond that the stage fails
//! (292 past its own limit, 146 past the budget) when the command refuses disk use;
//! otherwise the
//! groups held so far stay as they are and every later document goes, with its group
//! key, into a sort that spills to disk (`keyed_sort.rs`). The output then
//! walks the held groups and the sorted documents together in key order, finishing each
//! group from its held state and its later documents, which the stable sort keeps in
//! input order, so `$first`, `$last` and `$push` are as if nothing had spilled.

use crate::pipeline::{DocumentStream, ExecContext};
use crate::stages::keyed_sort::{KeyedDocuments, KeyedSort};
use crate::stages::{drain, finished};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{Accumulator, AccumulatorSpec, Expression, ParseContext, Variables};
use basalt_memory::{Exceeded, StageMemory};
use basalt_value::Collation;
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::collections::btree_map::{self, Entry};
use std::collections::BTreeMap;
use std::iter::Peekable;

#[derive(Debug)]
pub(crate) struct Group {
    id: Expression,
    fields: Vec<(String, AccumulatorSpec)>,
    /// What string keys compare under.
    collation: Option<Collation>,
    /// The specification it was parsed from (a `$bucket`'s or `$sortByCount`'s is the
    /// `$group` MongoDB defines it as): what a column store plans the group from.
    spec: Document,
}

/// A group's key: its `_id` value, ordered as values are, strings under the stage's
/// collation.
#[derive(Clone, Debug)]
pub(crate) struct GroupKey {
    value: Bson,
    collation: Option<Collation>,
}

/// MongoDB 8 runs `$group` in its slot-based engine, whose arithmetic errors have codes
/// of their own: an accumulator's argument that divides by zero fails with them.
fn slot_engine_error(e: Error) -> Error {
    match e.code.0 {
        2 if e.message == basalt_expr::DIVIDE_BY_ZERO => Error::location(4848401, e.message),
        16610 => Error::location(4848403, e.message),
        _ => e,
    }
}

impl GroupKey {
    pub(crate) fn new(value: Bson, collation: Option<Collation>) -> GroupKey {
        GroupKey { value, collation }
    }

    pub(crate) fn into_value(self) -> Bson {
        self.value
    }
}

impl PartialEq for GroupKey {
    fn eq(&self, other: &GroupKey) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for GroupKey {}

impl PartialOrd for GroupKey {
    fn partial_cmp(&self, other: &GroupKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for GroupKey {
    fn cmp(&self, other: &GroupKey) -> Ordering {
        basalt_value::compare_values_with(&self.value, &other.value, self.collation.as_ref())
    }
}

impl Group {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Group> {
        let Bson::Document(doc) = spec else {
            return Err(Error::location(
                15947,
                "a group's fields must be specified in an object",
            ));
        };
        let mut id = None;
        let mut fields = Vec::new();
        for (name, value) in doc {
            if name == "_id" {
                check_id_fields(value)?;
                id = Some(Expression::parse(value, ctx)?);
                continue;
            }
            if name.starts_with('$') {
                return Err(Error::location(
                    40236,
                    format!("The field name '{name}' cannot be an operator name"),
                ));
            }
            if name.contains('.') {
                return Err(Error::location(
                    40235,
                    format!("The field name '{name}' cannot contain '.'"),
                ));
            }
            fields.push((name.clone(), AccumulatorSpec::parse(name, value, ctx)?));
        }
        let id =
            id.ok_or_else(|| Error::location(15955, "a group specification must include an _id"))?;
        Ok(Group {
            id,
            fields,
            collation: ctx.collation().cloned(),
            spec: doc.clone(),
        })
    }

    pub(crate) fn spec(&self) -> &Document {
        &self.spec
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        self.apply_within(input, ctx, GROUP_MEMORY_LIMIT_BYTES)
    }

    /// [`Group::apply`] with the groups held in at most `limit` bytes.
    fn apply_within<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
        limit: usize,
    ) -> DocumentStream<'a> {
        let mut groups = Groups::within(limit);
        let mut overflow: Option<KeyedSort> = None;
        let result = drain(input, |doc| {
            if let Some(sort) = overflow.as_mut() {
                return sort.push(self.key(&doc, ctx.vars)?, doc);
            }
            let Err(exceeded) = self.add(&mut groups, &doc, ctx.vars)? else {
                return Ok(());
            };
            let Some(directory) = ctx.collections.spill_directory() else {
                return Err(match exceeded {
                    Exceeded::StageLimit => Error::new(
                        ErrorCode::QUERY_EXCEEDED_MEMORY_LIMIT_NO_DISK_USE_ALLOWED,
                        "Exceeded memory limit for $group, but didn't allow external sort. \
                         Pass allowDiskUse:true to opt in.",
                    ),
                    Exceeded::ServerBudget(exhausted) => exhausted.to_error("$group"),
                });
            };
            overflow = Some(KeyedSort::new(Some(directory), self.collation.as_ref())?);
            Ok(())
        });
        let sorted = match (result, overflow) {
            (Err(e), _) => return finished(Err(e)),
            (Ok(()), None) => return finished(self.finish(groups)),
            (Ok(()), Some(sort)) => match sort.finish() {
                Ok(sorted) => sorted,
                Err(e) => return finished(Err(e)),
            },
        };
        Box::new(OverflowGroups {
            group: self,
            vars: ctx.vars,
            held: groups.groups.into_iter().peekable(),
            sorted,
        })
    }

    /// The key expression, or an accumulator's argument (by position).
    pub(crate) fn expression(&self, role: crate::column_scan::Role) -> &Expression {
        match role {
            crate::column_scan::Role::Key => &self.id,
            crate::column_scan::Role::Argument(i) => &self.fields[i].1.argument,
        }
    }

    pub(crate) fn group_key(&self, value: Bson) -> GroupKey {
        GroupKey {
            value,
            collation: self.collation.clone(),
        }
    }

    /// The group key of `doc`; missing groups as null.
    fn key(&self, doc: &Document, vars: &Variables) -> Result<Bson> {
        Ok(self.id.evaluate(doc, vars)?.unwrap_or(Bson::Null))
    }

    pub(crate) fn new_accumulators(&self) -> Vec<Accumulator> {
        self.fields
            .iter()
            .map(|(_, spec)| spec.new_accumulator())
            .collect()
    }

    /// Feeds `doc` to a group's accumulators; returns the bytes of memory they grew by.
    fn accumulate(
        &self,
        accumulators: &mut [Accumulator],
        doc: &Document,
        vars: &Variables,
    ) -> Result<isize> {
        let mut grown = 0;
        for ((_, spec), acc) in self.fields.iter().zip(accumulators.iter_mut()) {
            let value = spec
                .argument
                .evaluate_ref(doc, vars)
                .map_err(slot_engine_error)?;
            grown += acc.accumulate(value.as_deref())?;
        }
        Ok(grown)
    }

    /// Adds one input document to its group. The inner result says whether the groups
    /// now hold more memory than they may.
    pub(crate) fn add(
        &self,
        groups: &mut Groups,
        doc: &Document,
        vars: &Variables,
    ) -> Result<Result<(), Exceeded>> {
        let key = self.group_key(self.key(doc, vars)?);
        let mut grown = 0;
        let accumulators = match groups.groups.entry(key) {
            Entry::Occupied(slot) => slot.into_mut(),
            Entry::Vacant(slot) => {
                grown += (basalt_value::value_memory_bytes(&slot.key().value)
                    + GROUP_OVERHEAD_BYTES
                    + std::mem::size_of::<Accumulator>() * self.fields.len())
                    as isize;
                slot.insert(self.new_accumulators())
            }
        };
        grown += self.accumulate(accumulators, doc, vars)?;
        Ok(groups.memory.charge(grown))
    }

    /// Merges the groups of input that came after the input of `groups`.
    pub(crate) fn merge(&self, groups: &mut Groups, later: Groups) -> Result<()> {
        // The later groups' memory moves over; an excess shows in `over_limit`.
        let _ = groups.memory.charge(later.memory.used_bytes() as isize);
        for (key, accumulators) in later.groups {
            merge_group(groups, key, accumulators)?;
        }
        Ok(())
    }

    /// Merges one group's state, from input that came after the input of `groups`
    /// (a column scan's row group), charging a new group's memory.
    pub(crate) fn absorb(
        &self,
        groups: &mut Groups,
        key: Bson,
        accumulators: Vec<Accumulator>,
    ) -> Result<()> {
        let key = self.group_key(key);
        if !groups.groups.contains_key(&key) {
            let _ = groups.memory.charge(
                (basalt_value::value_memory_bytes(&key.value)
                    + GROUP_OVERHEAD_BYTES
                    + std::mem::size_of::<Accumulator>() * self.fields.len())
                    as isize,
            );
        }
        merge_group(groups, key, accumulators)
    }

    /// One output document per group, in `_id` order.
    pub(crate) fn finish(&self, groups: Groups) -> Result<Vec<Document>> {
        groups
            .groups
            .into_iter()
            .map(|(key, accumulators)| self.output(key.value, accumulators))
            .collect()
    }

    fn output(&self, key: Bson, accumulators: Vec<Accumulator>) -> Result<Document> {
        let mut out = Document::new();
        out.insert("_id", key);
        for ((name, _), acc) in self.fields.iter().zip(accumulators) {
            out.insert(name.clone(), acc.finish()?);
        }
        Ok(out)
    }
}

fn merge_group(groups: &mut Groups, key: GroupKey, accumulators: Vec<Accumulator>) -> Result<()> {
    match groups.groups.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(accumulators);
        }
        Entry::Occupied(mut slot) => {
            for (acc, later) in slot.get_mut().iter_mut().zip(accumulators) {
                acc.merge(later)?;
            }
        }
    }
    Ok(())
}

/// MongoDB's `internalDocumentSourceGroupMaxMemoryBytes`.
pub(crate) const GROUP_MEMORY_LIMIT_BYTES: usize = 100 * 1024 * 1024;
/// What a group costs beyond its key's value and its accumulators: the rest of its key,
/// the accumulator vector and its place in the map.
const GROUP_OVERHEAD_BYTES: usize =
    std::mem::size_of::<GroupKey>() + std::mem::size_of::<Vec<Accumulator>>() + 16;

/// The groups seen so far, each with its accumulators, and the memory they hold: what
/// `$group` keeps while it reads, and what a partition of a parallel run hands over to
/// be merged.
#[derive(Debug)]
pub(crate) struct Groups {
    groups: BTreeMap<GroupKey, Vec<Accumulator>>,
    memory: StageMemory,
}

impl Default for Groups {
    fn default() -> Groups {
        Groups::within(GROUP_MEMORY_LIMIT_BYTES)
    }
}

impl Groups {
    fn within(limit_bytes: usize) -> Groups {
        Groups {
            groups: BTreeMap::new(),
            memory: StageMemory::new(limit_bytes),
        }
    }

    /// Whether the groups hold more than `$group` may, or than the server's budget had.
    pub(crate) fn over_limit(&self) -> bool {
        self.memory.exceeded()
    }
}

/// The output of a `$group` that spilled: the groups held in memory and the later
/// documents sorted by group key, walked together in key order.
struct OverflowGroups<'a> {
    group: &'a Group,
    vars: &'a Variables,
    held: Peekable<btree_map::IntoIter<GroupKey, Vec<Accumulator>>>,
    sorted: KeyedDocuments,
}

impl OverflowGroups<'_> {
    fn next_group(&mut self) -> Result<Option<Document>> {
        let sorted_key = self.sorted.peek_key()?;
        let (key, mut accumulators) = match (self.held.peek(), sorted_key) {
            (None, None) => return Ok(None),
            (Some((held, _)), Some(sorted))
                if held.cmp(&self.group.group_key(sorted.clone())) == Ordering::Greater =>
            {
                (sorted, self.group.new_accumulators())
            }
            (None, Some(sorted)) => (sorted, self.group.new_accumulators()),
            (Some(_), _) => {
                let (key, accumulators) = self.held.next().expect("peeked");
                (key.value, accumulators)
            }
        };
        let wanted = self.group.group_key(key);
        while let Some(next) = self.sorted.peek_key()? {
            if self.group.group_key(next) != wanted {
                break;
            }
            if let Some(doc) = self.sorted.next_document()? {
                self.group.accumulate(&mut accumulators, &doc, self.vars)?;
            }
        }
        self.group.output(wanted.value, accumulators).map(Some)
    }
}

impl Iterator for OverflowGroups<'_> {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        self.next_group().transpose()
    }
}

/// A compound `_id` (an object of fields, not an operator) takes expressions: no empty
/// field name (15998), no number or boolean, which would read as `$project`'s
/// inclusion (17390).
fn check_id_fields(id: &Bson) -> Result<()> {
    let Bson::Document(fields) = id else {
        return Ok(());
    };
    if fields
        .keys()
        .next()
        .is_some_and(|name| name.starts_with('$'))
    {
        return Ok(());
    }
    for (name, value) in fields {
        if name.is_empty() {
            return Err(Error::location(
                15998,
                "FieldPath field names may not be empty strings.",
            ));
        }
        if basalt_value::number::is_number(value) || matches!(value, Bson::Boolean(_)) {
            return Err(Error::location(
                17390,
                "$group does not support inclusion-style expressions",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stages: Vec<Document>, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&stages, None)?.run(input.into_iter().map(Ok))
    }

    fn sales() -> Vec<Document> {
        vec![
            doc! {"item": "a", "qty": 2, "price": 10.0, "tags": ["x"]},
            doc! {"item": "b", "qty": 1, "price": 20.0},
            doc! {"item": "a", "qty": 3_i64, "price": 10.0},
            doc! {"qty": 4},
        ]
    }

    #[test]
    fn groups_by_expression() {
        let out = run(
            vec![doc! {"$group": {
                "_id": "$item",
                "n": {"$count": {}},
                "qty": {"$sum": "$qty"},
                "avg": {"$avg": "$qty"},
                "revenue": {"$sum": {"$multiply": ["$qty", "$price"]}},
                "first": {"$first": "$qty"},
                "items": {"$push": "$tags"},
            }}],
            sales(),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": null, "n": 1, "qty": 4, "avg": 4.0, "revenue": 0, "first": 4, "items": []},
                doc! {"_id": "a", "n": 2, "qty": 5_i64, "avg": 2.5, "revenue": 50.0, "first": 2, "items": [["x"]]},
                doc! {"_id": "b", "n": 1, "qty": 1, "avg": 1.0, "revenue": 20.0, "first": 1, "items": []},
            ]
        );
    }

    #[test]
    fn compound_and_null_ids() {
        let out = run(
            vec![doc! {"$group": {"_id": {"i": "$item", "big": {"$gt": ["$qty", 1]}}, "c": {"$sum": 1}}}],
            sales(),
        )
        .unwrap();
        assert_eq!(out.len(), 3);
        assert!(out.contains(&doc! {"_id": {"i": "a", "big": true}, "c": 2}));
        assert!(out.contains(&doc! {"_id": {"big": true}, "c": 1}));
        let out = run(
            vec![doc! {"$group": {"_id": null, "max": {"$max": "$price"}}}],
            sales(),
        )
        .unwrap();
        assert_eq!(out, vec![doc! {"_id": null, "max": 20.0}]);
        let out = run(
            vec![doc! {"$group": {"_id": "$qty"}}],
            vec![doc! {"qty": 1}, doc! {"qty": 1.0}, doc! {"qty": 1_i64}],
        )
        .unwrap();
        assert_eq!(out, vec![doc! {"_id": 1}]);
        assert_eq!(
            run(vec![doc! {"$group": {"_id": null}}], vec![]).unwrap(),
            Vec::<Document>::new()
        );
    }

    /// Runs `$group` with its memory limit at `limit` bytes over `input`, spilling under
    /// `spill` when given.
    fn run_within(
        spec: Document,
        input: Vec<Document>,
        limit: usize,
        spill: Option<&std::path::Path>,
    ) -> basalt_error::Result<Vec<Document>> {
        let group = super::Group::parse(&bson::Bson::Document(spec), &Default::default())?;
        let mut collections = crate::testing::MemoryCollections::new("db");
        if let Some(dir) = spill {
            collections = collections.with_spill_directory(dir);
        }
        let vars = basalt_expr::Variables::new();
        let ctx = crate::pipeline::ExecContext {
            vars: &vars,
            collections: &collections,
        };
        group
            .apply_within(Box::new(input.into_iter().map(Ok)), ctx, limit)
            .collect()
    }

    #[test]
    fn groups_beyond_the_memory_limit_spill_or_fail() {
        let input: Vec<Document> = (0..3000)
            .map(|i| doc! {"k": (i * 7919) % 500, "i": i, "arr": [i % 3]})
            .collect();
        let spec = doc! {
            "_id": {"k": "$k", "a": "$arr"}, "n": {"$sum": 1}, "first": {"$first": "$i"},
            "last": {"$last": "$i"}, "all": {"$push": "$i"}, "avg": {"$avg": "$i"},
        };
        let whole = run_within(spec.clone(), input.clone(), usize::MAX, None).unwrap();
        assert_eq!(whole.len(), 1500);
        let dir = tempfile::tempdir().unwrap();
        let spilled = run_within(spec.clone(), input.clone(), 4096, Some(dir.path())).unwrap();
        assert_eq!(spilled, whole);
        let err = run_within(spec, input, 4096, None).unwrap_err();
        assert_eq!(err.code.0, 292);
        assert!(err.message.contains("Exceeded memory limit for $group"));
    }

    #[test]
    fn group_errors() {
        let code = |spec: Document| run(vec![doc! {"$group": spec}], vec![]).unwrap_err().code.0;
        assert_eq!(code(doc! {"n": {"$sum": 1}}), 15955);
        assert_eq!(code(doc! {"_id": null, "a.b": {"$sum": 1}}), 40235);
        assert_eq!(code(doc! {"_id": null, "$a": {"$sum": 1}}), 40236);
        assert_eq!(code(doc! {"_id": null, "a": 1}), 40234);
        assert_eq!(code(doc! {"_id": null, "a": {"$bogus": 1}}), 15952);
        assert_eq!(code(doc! {"_id": {"a": 1}}), 17390);
        assert_eq!(code(doc! {"_id": {"a": "$x", "b": true}}), 17390);
        assert_eq!(code(doc! {"_id": {"": "$x"}}), 15998);
        assert_eq!(
            run(vec![doc! {"$group": 1}], vec![]).unwrap_err().code.0,
            15947
        );
        let err = run(
            vec![doc! {"$group": {"_id": null, "m": {"$mergeObjects": "$x"}}}],
            vec![doc! {"x": 1}],
        );
        assert_eq!(err.unwrap_err().code.0, 5911200);
    }
}
