//! A parsed aggregation pipeline and its execution.
//!
//! Execution is pull-based: [`Pipeline::stream`] wraps the input iterator in one
//! iterator adapter per stage and returns an iterator of results. Streaming stages
//! (`$match`, `$project`, `$unwind`, `$limit`, ...) handle one document at a time, so a
//! `$limit` stops the collection scan early and a cursor can hand out batches without the
//! whole result in memory; blocking stages (`$group`, `$sort`, `$count`) drain their input
//! when first pulled. [`Pipeline::run`] collects everything, for callers that want a
//! vector.
//!
//! Stages that reach beyond their input (`$lookup`, `$unionWith`, `$out`, `$merge`, ...)
//! do so through [`Collections`], which the server implements; sub-pipelines of
//! `$lookup`, `$unionWith`, `$facet` and `$merge` are [`Stages`] parsed for their
//! [`Place`], which decides the stages they may hold.
//!
//! `$group` keeps mergeable partial state (`basalt_expr::Accumulator::merge`), so the
//! executor can later run the stages before the first blocking stage on several
//! partitions in parallel and merge the partial groups, as MongoDB merges shard results.

use crate::stages::{self, current_op::CurrentOpOptions, Stage};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{FieldSet, ParseContext, Scope, Variables};
use bson::{Bson, Document};

/// A stream of documents flowing between stages; an `Err` ends the stream.
pub type DocumentStream<'a> = Box<dyn Iterator<Item = Result<Document>> + Send + 'a>;

/// Whose logical sessions `$listSessions`/`$listLocalSessions` list.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionUsers {
    /// `{}`: the current user's (everyone's without access control).
    Current,
    /// `{allUsers: true}`.
    All,
    /// `{users: [{user, db}]}`.
    Listed(Vec<(String, String)>),
}

/// The pipeline's window on the rest of the server: other collections, for the stages that
/// read them (`$lookup`, `$graphLookup`, `$unionWith`) or write them (`$out`, `$merge`),
/// and the server state that `$listLocalSessions`, `$currentOp`, `$collStats` and
/// `$indexStats` report. The server
/// implements it over its catalog; stages only ever see this trait, so they can be tested
/// against an in-memory implementation.
pub trait Collections: Sync {
    /// The database the command runs in, which collection names without one refer to.
    fn database(&self) -> &str;

    /// All documents of `collection` in database `db`, in natural order; none when the
    /// collection does not exist.
    fn scan(&self, db: &str, collection: &str) -> Result<DocumentStream<'_>>;

    /// `$out`: replaces the collection (created if missing, keeping its options and
    /// indexes otherwise) by `documents`; with `timeseries` options, a time-series
    /// collection with them. When anything fails, the collection is left as it was.
    fn replace_collection(
        &self,
        db: &str,
        collection: &str,
        timeseries: Option<&Document>,
        documents: &mut dyn Iterator<Item = Result<Document>>,
    ) -> Result<()>;

    /// `$merge`: the collection whose documents are found by the values of the `on`
    /// fields. Other fields than `_id` need a unique index with exactly these fields
    /// (error 51183 otherwise), so that at most one document matches.
    fn merge_target(
        &self,
        db: &str,
        collection: &str,
        on: &[String],
    ) -> Result<Box<dyn MergeTarget + '_>>;

    /// `$listLocalSessions`: the sessions this server holds, as `config.system.sessions`
    /// documents.
    fn local_sessions(&self) -> Result<Vec<Document>>;

    /// The `uid`s of the users whose sessions `$listSessions`/`$listLocalSessions` ask
    /// for; `None` for every user's.
    fn session_owners(&self, users: &SessionUsers) -> Result<Option<Vec<Vec<u8>>>>;

    /// `$currentOp`: the operations in progress, and what else the options ask for.
    fn current_ops(&self, options: &CurrentOpOptions) -> Result<Vec<Document>>;

    /// `$querySettings`: the settings of each query shape that has some, with the shape
    /// itself when `debug_shape`.
    fn query_settings(&self, debug_shape: bool) -> Result<Vec<Document>>;

    /// Where blocking stages (`$sort`) spill beyond their memory limit; `None` when the
    /// command does not allow disk use (they fail at the limit instead).
    fn spill_directory(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// `$collStats`: `{ns, host}` of the collection the pipeline aggregates, with
    /// `storageStats` (the `collStats` command's figures, sizes divided by `scale`) and
    /// `latencyStats` (with a histogram per class when `histograms`) when the
    /// collection exists.
    fn collection_stats(&self, scale: i64, histograms: bool) -> Result<Document>;

    /// `$indexStats`: one document per index of the collection the pipeline aggregates,
    /// `{name, key, host, accesses: {ops, since}, spec}`; none when it does not exist.
    fn index_stats(&self) -> Result<Vec<Document>>;

    /// `$planCacheStats`: one document per query shape the planner cached a choice for
    /// on the collection the pipeline aggregates (NamespaceNotFound-like 50933 when it
    /// does not exist).
    fn plan_cache_stats(&self) -> Result<Vec<Document>>;

    /// `$listClusterCatalog`: one document per collection, view and time-series
    /// collection of the database (of every database from `admin`), with the shards
    /// that hold it when `shards`.
    fn cluster_catalog(&self, shards: bool) -> Result<Vec<Document>>;
}

/// What `$merge` decides to write for one of its documents.
#[derive(Clone, Debug, PartialEq)]
pub enum MergeWrite {
    /// Write nothing.
    Keep,
    /// Insert the document (whatever matched: a match then fails on the unique index
    /// with DuplicateKey, which is how `whenMatched: "fail"` reports it).
    Insert(Document),
    /// Replace the matching document; its `_id` is unchanged.
    Replace(Document),
}

/// The collection a `$merge` writes.
pub trait MergeTarget {
    /// Finds the document whose `on` fields equal those of `key` (a document of the `on`
    /// paths and their values) and writes what `decide` makes of it, both under the
    /// collection's write lock, so no other writer comes in between.
    fn upsert(
        &mut self,
        key: &Document,
        decide: &mut dyn FnMut(Option<&Document>) -> Result<MergeWrite>,
    ) -> Result<()>;
}

/// For pipelines run where nothing outside their input can be reached.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCollections;

impl NoCollections {
    fn unavailable(what: &str) -> Error {
        Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("no collections are available here, not even {what}"),
        )
    }
}

impl Collections for NoCollections {
    fn database(&self) -> &str {
        ""
    }

    fn scan(&self, db: &str, collection: &str) -> Result<DocumentStream<'_>> {
        Err(Self::unavailable(&format!("{db}.{collection}")))
    }

    fn replace_collection(
        &self,
        db: &str,
        collection: &str,
        _timeseries: Option<&Document>,
        _documents: &mut dyn Iterator<Item = Result<Document>>,
    ) -> Result<()> {
        Err(Self::unavailable(&format!("{db}.{collection}")))
    }

    fn merge_target(
        &self,
        db: &str,
        collection: &str,
        _on: &[String],
    ) -> Result<Box<dyn MergeTarget + '_>> {
        Err(Self::unavailable(&format!("{db}.{collection}")))
    }

    fn local_sessions(&self) -> Result<Vec<Document>> {
        Err(Self::unavailable("the session cache"))
    }

    fn session_owners(&self, _users: &SessionUsers) -> Result<Option<Vec<Vec<u8>>>> {
        Err(Self::unavailable("the session cache"))
    }

    fn current_ops(&self, _options: &CurrentOpOptions) -> Result<Vec<Document>> {
        Err(Self::unavailable("the operations in progress"))
    }

    fn query_settings(&self, _debug_shape: bool) -> Result<Vec<Document>> {
        Err(Self::unavailable("the query settings"))
    }

    fn collection_stats(&self, _scale: i64, _histograms: bool) -> Result<Document> {
        Err(Self::unavailable("collection statistics"))
    }

    fn index_stats(&self) -> Result<Vec<Document>> {
        Err(Self::unavailable("index statistics"))
    }

    fn plan_cache_stats(&self) -> Result<Vec<Document>> {
        Err(Self::unavailable("plan cache statistics"))
    }

    fn cluster_catalog(&self, _shards: bool) -> Result<Vec<Document>> {
        Err(Self::unavailable("the catalog"))
    }
}

/// What every stage may use while it runs.
#[derive(Clone, Copy)]
pub struct ExecContext<'a> {
    pub vars: &'a Variables,
    pub collections: &'a dyn Collections,
}

/// Where a list of stages runs, which decides the stages it may hold: `$out` and `$merge`
/// only at the top, `$facet` not inside another, only document reshaping in an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// A pipeline whose caller provides the input and has checked what it runs on.
    Top,
    /// The pipeline of an `aggregate` command, over a collection or, `collectionless`,
    /// over nothing (`aggregate: 1`).
    Aggregate {
        collectionless: bool,
    },
    Lookup,
    UnionWith,
    Facet,
    /// An input pipeline of `$rankFusion`.
    RankFusion,
    /// The `whenMatched` pipeline of `$merge`.
    Update,
}

/// MongoDB's internalPipelineLengthLimit: the most stages one pipeline (or sub-pipeline)
/// may have.
const PIPELINE_STAGES_MAX: usize = 1000;

/// Refuses a pipeline of more than [`PIPELINE_STAGES_MAX`] stages, as the user wrote it
/// (before any stages are coalesced).
fn check_length(specs: &[Document]) -> Result<()> {
    if specs.len() > PIPELINE_STAGES_MAX {
        return Err(Error::location(
            7749501,
            format!("Pipeline length must be no longer than {PIPELINE_STAGES_MAX} stages."),
        ));
    }
    Ok(())
}

/// Parsed stages that run as one unit: a pipeline's body, or the sub-pipeline of a
/// `$lookup`, `$unionWith`, `$facet` or `$merge`.
#[derive(Debug)]
pub(crate) struct Stages(pub(crate) Vec<Stage>);

impl Stages {
    /// Parses `specs`, then checks that each stage may stand where it does.
    pub(crate) fn parse(specs: &[Document], ctx: &ParseContext, place: Place) -> Result<Stages> {
        // Checked before parsing, as MongoDB does, so a huge pipeline costs nothing.
        check_length(specs)?;
        // Fusing rankings takes the whole input: the first stage only, checked before
        // any stage's own arguments.
        let names: Vec<&str> = specs
            .iter()
            .map(|spec| spec.keys().next().map_or("", String::as_str))
            .collect();
        for (position, name) in names.iter().enumerate().skip(1) {
            if !matches!(*name, "$rankFusion" | "$scoreFusion") {
                continue;
            }
            // A read of a time-series collection unpacks its buckets first.
            if names[..position].contains(&"$_internalUnpackBucket") {
                return Err(Error::location(
                    10557301,
                    format!("{name} is not supported on time-series collections"),
                ));
            }
            return Err(Error::location(
                10170100,
                format!("{name} must be the first stage in the pipeline"),
            ));
        }
        let mut parsed = Vec::with_capacity(specs.len());
        for spec in specs {
            parsed.extend(Stage::parse(spec, ctx)?);
        }
        // `$sort` then `$limit`: the sort keeps only the first documents.
        for i in 1..parsed.len() {
            if let Stage::Limit(n) = parsed[i] {
                if let Stage::Sort(sort) = &mut parsed[i - 1] {
                    sort.keep = Some(n);
                }
            }
        }
        for (position, spec) in specs.iter().enumerate() {
            let name = spec.keys().next().map_or("", String::as_str);
            // A time-series read's `$geoNear` is the first stage over the measurements.
            let unpacked = names[..position]
                .iter()
                .all(|n| matches!(*n, "$match" | "$_internalUnpackBucket"))
                && names[..position].contains(&"$_internalUnpackBucket");
            let position = if name == "$geoNear" && unpacked {
                0
            } else {
                position
            };
            stages::check_placement(name, position, specs.len(), place)?;
        }
        Ok(Stages(parsed))
    }

    /// Parses the `pipeline` argument of a stage, which must be an array of objects.
    pub(crate) fn parse_argument(spec: &Bson, ctx: &ParseContext, place: Place) -> Result<Stages> {
        let Bson::Array(items) = spec else {
            return Err(Error::type_mismatch(
                "'pipeline' option must be specified as an array",
            ));
        };
        Stages::parse(&stage_documents(items)?, ctx, place)
    }

    /// Whether the first stage makes its own documents (`$documents`), so the stages
    /// read no collection.
    pub(crate) fn starts_with_source(&self) -> bool {
        self.0.first().is_some_and(Stage::is_source)
    }

    /// Runs the stages over `input` lazily.
    pub(crate) fn stream<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        stream_stages(&self.0, input, ctx)
    }
}

/// The stages of a `pipeline` array, which must all be objects.
pub fn stage_documents(stages: &[Bson]) -> Result<Vec<Document>> {
    stages
        .iter()
        .map(|stage| match stage {
            Bson::Document(d) => Ok(d.clone()),
            _ => Err(Error::type_mismatch(
                "Each element of the 'pipeline' array must be an object",
            )),
        })
        .collect()
}

/// Runs `stages` over `input` lazily: one iterator adapter per stage.
pub(crate) fn stream_stages<'a>(
    stages: &'a [Stage],
    input: DocumentStream<'a>,
    ctx: ExecContext<'a>,
) -> DocumentStream<'a> {
    stages
        .iter()
        .fold(input, |stream, stage| stage.apply(stream, ctx))
}

#[derive(Debug)]
pub struct Pipeline {
    stages: Stages,
    /// The stages' specifications as parsed (after optimization), for a column plan.
    specs: Vec<Document>,
    vars: Variables,
    /// The top-level fields of its input documents the pipeline reads.
    input_fields: FieldSet,
}

/// A pipeline a server may run as a `find`: see [`Pipeline::pass_through`].
#[derive(Debug, PartialEq)]
pub struct PassThrough {
    pub skip: u64,
    pub limit: Option<u64>,
    /// A `find` projection (plain inclusions or exclusions).
    pub projection: Option<Document>,
}

/// How deep sub-pipelines (`$lookup`, `$unionWith`, `$facet`) may nest, as in MongoDB.
const MAX_SUB_PIPELINE_DEPTH: usize = 20;

/// How deep the sub-pipelines of `stages` nest (0 for none).
fn sub_pipeline_depth(stages: &[Document]) -> usize {
    let nested = |value: Option<&Bson>| match value {
        Some(Bson::Array(stages)) => {
            let stages: Vec<Document> = stages
                .iter()
                .filter_map(|s| s.as_document().cloned())
                .collect();
            1 + sub_pipeline_depth(&stages)
        }
        _ => 0,
    };
    stages
        .iter()
        .flat_map(|stage| stage.iter())
        .map(|(name, spec)| match (name.as_str(), spec) {
            ("$lookup" | "$unionWith", Bson::Document(spec)) => nested(spec.get("pipeline")),
            ("$facet", Bson::Document(facets)) => {
                facets.values().map(|f| nested(Some(f))).max().unwrap_or(0)
            }
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// Makes a time-series read's leading `$_internalUnpackBucket` (after the buckets'
/// `$match`, if any) decode only the fields the stages after it read.
fn narrow_unpacking(parsed: &mut Stages, specs: &[Document], scope: &Scope) {
    let Some(at) = specs
        .iter()
        .position(|spec| !spec.contains_key("$match"))
        .filter(|at| specs[*at].contains_key("$_internalUnpackBucket"))
    else {
        return;
    };
    // Each `$match` before it is one stage: the stage at `at` is the unpacking.
    if let Some(Stage::UnpackBucket(unpack)) = parsed.0.get_mut(at) {
        unpack.include(crate::dependencies::pipeline_fields(&specs[at + 1..], scope).into_fields());
    }
}

impl Pipeline {
    /// Parses pipeline stages whose input the caller provides. `let_vars` is the
    /// command's `let` option: each value is a constant expression, evaluated once here
    /// and visible to every stage as `$$name`.
    pub fn parse(stages: &[Document], let_vars: Option<&Document>) -> Result<Pipeline> {
        Pipeline::parse_at(stages, let_vars, Place::Top, None)
    }

    /// Parses the pipeline of an `aggregate` command, which also checks it against what
    /// it runs on: a database-level aggregation (`aggregate: 1`, `collectionless`) must
    /// start with a stage that makes its own documents, and a collection's must not.
    /// Strings compare under `collation` in its `$match` and `$sort` stages. The stages
    /// are optimized first ([`crate::optimize`]).
    pub fn parse_aggregate(
        stages: &[Document],
        let_vars: Option<&Document>,
        collectionless: bool,
        collation: Option<&basalt_value::Collation>,
    ) -> Result<Pipeline> {
        if stages.is_empty() && collectionless {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "{aggregate: 1} is not valid for an empty pipeline.",
            ));
        }
        let later_text = stages.iter().skip(1).any(|stage| {
            stage
                .get_document("$match")
                .is_ok_and(|filter| filter.contains_key("$text"))
        });
        if later_text {
            return Err(Error::location(
                17313,
                "$match with $text is only allowed as the first pipeline stage",
            ));
        }
        if sub_pipeline_depth(stages) > MAX_SUB_PIPELINE_DEPTH {
            return Err(Error::location(
                232,
                format!(
                    "Maximum number of nested sub-pipelines exceeded. Limit is \
                     {MAX_SUB_PIPELINE_DEPTH}"
                ),
            ));
        }
        check_length(stages)?;
        Pipeline::parse_at(
            &crate::optimize(stages.to_vec()),
            let_vars,
            Place::Aggregate { collectionless },
            collation,
        )
    }

    /// Parses the pipeline of a pipeline-style update, which may only reshape the
    /// document (`$addFields`/`$set`, `$project`, `$unset`, `$replaceRoot`/`$replaceWith`;
    /// InvalidOptions otherwise), as `$merge`'s `whenMatched` pipeline.
    pub fn parse_update(stages: &[Document], let_vars: Option<&Document>) -> Result<Pipeline> {
        Pipeline::parse_at(stages, let_vars, Place::Update, None)
    }

    fn parse_at(
        stages: &[Document],
        let_vars: Option<&Document>,
        place: Place,
        collation: Option<&basalt_value::Collation>,
    ) -> Result<Pipeline> {
        let scope = match let_vars {
            Some(let_vars) => Scope::with_let(let_vars)?,
            None => Scope::new(),
        };
        let parsed = Stages::parse(
            stages,
            &scope.names.clone().with_collation(collation.cloned()),
            place,
        )?;
        let mut parsed = parsed;
        narrow_unpacking(&mut parsed, stages, &scope);
        Ok(Pipeline {
            stages: parsed,
            specs: stages.to_vec(),
            input_fields: crate::dependencies::pipeline_fields(stages, &scope),
            vars: scope.values.with_collation(collation),
        })
    }

    /// The top-level fields of its input documents the pipeline reads (whatever stage
    /// reads them, including a leading `$match` taken out for the scan): a scan may
    /// decode only these. `None` when it may read any field.
    pub fn input_fields(&self) -> Option<&[String]> {
        self.input_fields.fields()
    }

    pub(crate) fn specs(&self) -> &[Document] {
        &self.specs
    }

    pub(crate) fn stages(&self) -> &[Stage] {
        &self.stages.0
    }

    pub(crate) fn variables(&self) -> &Variables {
        &self.vars
    }

    /// Takes a leading `$_internalUnpackBucket` for a server that unpacks the buckets
    /// from their stored bytes as it scans them.
    pub fn take_leading_unpack(&mut self) -> Option<crate::UnpackBucket> {
        if !matches!(self.stages.0.first(), Some(Stage::UnpackBucket(_))) {
            return None;
        }
        match self.stages.0.remove(0) {
            Stage::UnpackBucket(unpack) => Some(unpack),
            _ => None,
        }
    }

    /// Takes the query part of a leading `$match` (all of it but a top-level `$expr`)
    /// for a server that applies it in the scan instead, where it can use an index; a
    /// `$expr` stays behind in the pipeline.
    pub fn take_leading_match(&mut self) -> Result<Option<Document>> {
        let Some(Stage::Match(stage)) = self.stages.0.first_mut() else {
            return Ok(None);
        };
        let (filter, expr_left) = stage.take_query_part()?;
        if !expr_left {
            self.stages.0.remove(0);
        }
        Ok(Some(filter))
    }

    /// A time-series read's `$geoNear`, right after the unpacking, for the server to
    /// name the measurement field it measures (from the buckets' `2dsphere_bucket`
    /// indexes).
    pub fn unpacked_geo_near(&mut self) -> Option<&mut crate::GeoNear> {
        match self.stages.0.as_mut_slice() {
            [Stage::UnpackBucket(_), Stage::GeoNear(geo_near), ..] => Some(geo_near),
            _ => None,
        }
    }

    /// A leading `$geoNear`, for the server to name the geo field it measures (from the
    /// collection's geo indexes).
    pub fn leading_geo_near(&mut self) -> Option<&mut crate::GeoNear> {
        match self.stages.0.first_mut() {
            Some(Stage::GeoNear(geo_near)) => Some(geo_near),
            _ => None,
        }
    }

    /// The keys of a leading `$sort` (after the leading `$match` was taken), which an
    /// index scan may provide.
    pub fn leading_sort(&self) -> Option<&Document> {
        match self.stages.0.first() {
            Some(Stage::Sort(sort)) => Some(sort.keys()),
            _ => None,
        }
    }

    /// How many of its first documents a leading `$sort` keeps (a `$limit` after it).
    pub fn leading_sort_keep(&self) -> Option<u64> {
        match self.stages.0.first() {
            Some(Stage::Sort(sort)) => sort.keep,
            _ => None,
        }
    }

    /// The size of a leading `$sample`.
    pub fn leading_sample(&self) -> Option<u64> {
        match self.stages.0.first() {
            Some(Stage::Sample(size)) => Some(*size),
            _ => None,
        }
    }

    /// Drops the leading `$sample`, for a server that drew the sample itself.
    pub fn remove_leading_sample(&mut self) {
        if let Some(Stage::Sample(_)) = self.stages.0.first() {
            self.stages.0.remove(0);
        }
    }

    /// Drops the leading `$sort`, for a server whose scan returns documents in its order.
    pub fn remove_leading_sort(&mut self) {
        if let Some(Stage::Sort(_)) = self.stages.0.first() {
            self.stages.0.remove(0);
        }
    }

    /// What is left of the pipeline when its documents pass through unchanged but for
    /// `$skip`, `$limit` and a projection that only includes or excludes stored fields
    /// (after the leading `$match` and an index-provided `$sort` were taken): a server
    /// then reads them as `find` does, handing out stored bytes, instead of decoding
    /// every document for stages that change nothing. `None` for any other pipeline.
    pub fn pass_through(&self) -> Option<PassThrough> {
        let mut shape = PassThrough {
            skip: 0,
            limit: None,
            projection: None,
        };
        for stage in self.stages() {
            match stage {
                Stage::Skip(n) => {
                    shape.skip = shape.skip.saturating_add(*n);
                    shape.limit = shape.limit.map(|limit| limit.saturating_sub(*n));
                }
                Stage::Limit(n) => shape.limit = Some(shape.limit.map_or(*n, |l| l.min(*n))),
                // One projection: the window does not depend on what it keeps.
                Stage::Project(projection) if shape.projection.is_none() => {
                    shape.projection = Some(projection.plain_spec()?);
                }
                _ => return None,
            }
        }
        // A window emptied by its own stages (`$limit: 5, $skip: 10`) is left to them:
        // a find's limit of 0 means none.
        (shape.limit != Some(0)).then_some(shape)
    }

    /// Runs the pipeline over `input` lazily. Stages that write (`$out`, `$merge`) have
    /// written everything once the stream is exhausted.
    pub fn stream<'a>(
        &'a self,
        input: DocumentStream<'a>,
        collections: &'a dyn Collections,
    ) -> DocumentStream<'a> {
        let ctx = ExecContext {
            vars: &self.vars,
            collections,
        };
        self.stages.stream(input, ctx)
    }

    /// Runs the pipeline over `input` and collects the results, with no other
    /// collection reachable.
    pub fn run(
        &self,
        input: impl Iterator<Item = Result<Document>> + Send,
    ) -> Result<Vec<Document>> {
        self.stream(Box::new(input), &NoCollections).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>> {
        Pipeline::parse(&stages, None)?.run(input.into_iter().map(Ok))
    }

    /// The pass-through shape left after the leading `$match`, or `None`.
    fn pass_through(stages: Vec<Document>) -> Option<PassThrough> {
        let mut pipeline = Pipeline::parse_aggregate(&stages, None, false, None).unwrap();
        pipeline.take_leading_match().unwrap();
        pipeline.pass_through()
    }

    #[test]
    fn pass_through_windows_and_plain_projections() {
        let shape = |skip, limit, projection| {
            Some(PassThrough {
                skip,
                limit,
                projection,
            })
        };
        assert_eq!(pass_through(vec![]), shape(0, None, None));
        assert_eq!(
            pass_through(vec![doc! {"$match": {"a": 1}}]),
            shape(0, None, None)
        );
        // $skip then $limit, and $limit then $skip (which shortens the window).
        assert_eq!(
            pass_through(vec![doc! {"$skip": 3}, doc! {"$limit": 5}]),
            shape(3, Some(5), None)
        );
        assert_eq!(
            pass_through(vec![doc! {"$limit": 5}, doc! {"$skip": 3}]),
            shape(3, Some(2), None)
        );
        assert_eq!(
            pass_through(vec![doc! {"$limit": 5}, doc! {"$skip": 5}]),
            None
        );
        assert_eq!(
            pass_through(vec![doc! {"$project": {"a": 1, "b": {"c": true}}}]),
            shape(0, None, Some(doc! {"_id": 1, "a": 1, "b.c": 1}))
        );
        assert_eq!(
            pass_through(vec![doc! {"$unset": ["a", "b.c"]}]),
            shape(0, None, Some(doc! {"a": 0, "b.c": 0}))
        );
        assert_eq!(
            pass_through(vec![
                doc! {"$project": {"_id": 0, "a": 1}},
                doc! {"$limit": 2}
            ]),
            shape(0, Some(2), Some(doc! {"_id": 0, "a": 1}))
        );
        // Stages that change documents, or a second projection, are not passed through.
        for stages in [
            vec![doc! {"$project": {"a": {"$add": [1, 2]}}}],
            vec![doc! {"$set": {"a": 1}}],
            vec![doc! {"$sort": {"a": 1}}],
            vec![
                doc! {"$match": {"a": 1}},
                doc! {"$limit": 1},
                doc! {"$match": {"b": 1}},
            ],
            vec![
                doc! {"$project": {"a": 1}},
                doc! {"$limit": 1},
                doc! {"$project": {"a": 0}},
            ],
            vec![doc! {"$match": {"$expr": {"$eq": ["$a", 1]}}}],
        ] {
            assert_eq!(pass_through(stages.clone()), None, "{stages:?}");
        }
    }

    #[test]
    fn stage_shape_errors() {
        let code = |stages: Vec<Document>| Pipeline::parse(&stages, None).unwrap_err().code.0;
        assert_eq!(code(vec![doc! {"$match": {}, "$limit": 1}]), 40323);
        assert_eq!(code(vec![doc! {}]), 40323);
        assert_eq!(code(vec![doc! {"$foo": 1}]), 40324);
        assert_eq!(
            Pipeline::parse(&[doc! {"$nonsense": {}}], None)
                .unwrap_err()
                .message,
            "Unrecognized pipeline stage name: '$nonsense'"
        );
        let limits = |n: usize| vec![doc! {"$limit": 1}; n];
        assert!(Pipeline::parse(&limits(PIPELINE_STAGES_MAX), None).is_ok());
        assert_eq!(code(limits(PIPELINE_STAGES_MAX + 1)), 7749501);
        let facet = vec![doc! {"$facet": {"f": limits(PIPELINE_STAGES_MAX + 1)}}];
        assert_eq!(code(facet), 7749501);
    }

    #[test]
    fn update_pipelines_only_reshape() {
        let p =
            Pipeline::parse_update(&[doc! {"$set": {"b": "$$x"}}], Some(&doc! {"x": 2})).unwrap();
        assert_eq!(
            p.run(std::iter::once(Ok(doc! {"a": 1}))).unwrap(),
            vec![doc! {"a": 1, "b": 2}]
        );
        let err = Pipeline::parse_update(&[doc! {"$match": {}}], None).unwrap_err();
        assert_eq!(
            (err.code.0, err.message.as_str()),
            (72, "$match is not allowed to be used within an update")
        );
    }

    #[test]
    fn empty_pipeline_passes_documents_through() {
        let docs = vec![doc! {"a": 1}, doc! {"a": 2}];
        assert_eq!(run(vec![], docs.clone()).unwrap(), docs);
    }

    #[test]
    fn let_variables_are_visible_to_stages() {
        let p = Pipeline::parse(
            &[doc! {"$project": {"x": {"$add": ["$$base", "$a"]}, "_id": 0}}],
            Some(&doc! {"base": 10, "twice": {"$multiply": ["$$base", 2]}}),
        )
        .unwrap();
        assert_eq!(
            p.run(vec![Ok(doc! {"a": 1})].into_iter()).unwrap(),
            vec![doc! {"x": 11}]
        );
        assert_eq!(
            Pipeline::parse(&[], Some(&doc! {"Bad": 1}))
                .unwrap_err()
                .code
                .0,
            9
        );
    }

    #[test]
    fn leading_match_and_sort_go_to_the_scan() {
        let mut p = Pipeline::parse(
            &[
                doc! {"$match": {"a": 1}},
                doc! {"$sort": {"a": -1}},
                doc! {"$limit": 1},
            ],
            None,
        )
        .unwrap();
        assert_eq!(p.leading_sort(), None, "the $match comes first");
        assert_eq!(p.take_leading_match().unwrap(), Some(doc! {"a": 1}));
        assert_eq!(p.leading_sort(), Some(&doc! {"a": -1}));
        p.remove_leading_sort();
        assert_eq!(p.leading_sort(), None);
        let out = p
            .run([doc! {"a": 1}, doc! {"a": 2}].into_iter().map(Ok))
            .unwrap();
        assert_eq!(
            out,
            vec![doc! {"a": 1}],
            "input order is kept: the scan sorted"
        );
        // The query part of a $match with $expr goes to the scan; the $expr stays.
        let mut p = Pipeline::parse(
            &[doc! {"$match": {"b": {"$lt": 5}, "$expr": {"$gt": ["$a", "$b"]}}}],
            None,
        )
        .unwrap();
        assert_eq!(
            p.take_leading_match().unwrap(),
            Some(doc! {"b": {"$lt": 5}})
        );
        let kept = p
            .run(
                [
                    doc! {"a": 9, "b": 1},
                    doc! {"a": 0, "b": 1},
                    doc! {"a": 9, "b": 7},
                ]
                .into_iter()
                .map(Ok),
            )
            .unwrap();
        assert_eq!(
            kept.len(),
            2,
            "the scan, not the pipeline, now applies b < 5"
        );
    }

    #[test]
    fn errors_stop_the_stream() {
        let result = run(
            vec![doc! {"$project": {"x": {"$add": ["$a", 1]}}}],
            vec![doc! {"a": 1}, doc! {"a": "s"}],
        );
        assert_eq!(result.unwrap_err().code.0, 14);
        let input = vec![
            Ok(doc! {"a": 1}),
            Err(Error::internal("disk")),
            Ok(doc! {"a": 2}),
        ];
        let p = Pipeline::parse(&[doc! {"$skip": 5}], None).unwrap();
        assert_eq!(p.run(input.into_iter()).unwrap_err().message, "disk");
    }

    #[test]
    fn limit_stops_pulling_input() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pulled = AtomicUsize::new(0);
        let input = (0..1000).map(|i| {
            pulled.fetch_add(1, Ordering::Relaxed);
            Ok(doc! {"i": i})
        });
        let p = Pipeline::parse(&[doc! {"$match": {}}, doc! {"$limit": 3}], None).unwrap();
        assert_eq!(p.run(input).unwrap().len(), 3);
        assert_eq!(pulled.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn banding_workload_shape() {
        // W1: band engine sizes (x1.5 for diesel), then count and sum miles per band.
        let input = vec![
            doc! {"engine": 1000, "fuel": "petrol", "miles": 10},
            doc! {"engine": 1000, "fuel": "diesel", "miles": 20},
            doc! {"engine": 2400, "fuel": "petrol", "miles": 5},
            doc! {"engine": 1200, "fuel": "diesel", "miles": 7_i64},
        ];
        let stages = vec![
            doc! {"$project": {"_id": 0, "miles": 1, "band": {"$cond": [
                {"$lt": [{"$multiply": ["$engine", {"$cond": [{"$eq": ["$fuel", "diesel"]}, 1.5, 1]}]}, 1400]},
                "small",
                {"$cond": [{"$lt": [{"$multiply": ["$engine", {"$cond": [{"$eq": ["$fuel", "diesel"]}, 1.5, 1]}]}, 2000]}, "medium", "large"]},
            ]}}},
            doc! {"$group": {"_id": "$band", "n": {"$sum": 1}, "miles": {"$sum": "$miles"}}},
            doc! {"$sort": {"n": -1, "_id": 1}},
        ];
        assert_eq!(
            run(stages, input).unwrap(),
            vec![
                doc! {"_id": "medium", "n": 2, "miles": 27_i64},
                doc! {"_id": "large", "n": 1, "miles": 5},
                doc! {"_id": "small", "n": 1, "miles": 10},
            ]
        );
    }

    #[test]
    fn unwind_then_group() {
        let input = vec![
            doc! {"tags": ["a", "b"]},
            doc! {"tags": ["b"]},
            doc! {"tags": []},
        ];
        let out = run(
            vec![
                doc! {"$unwind": "$tags"},
                doc! {"$sortByCount": "$tags"},
                doc! {"$replaceWith": {"tag": "$_id", "n": "$count"}},
            ],
            input,
        )
        .unwrap();
        assert_eq!(
            out,
            vec![doc! {"tag": "b", "n": 2}, doc! {"tag": "a", "n": 1}]
        );
    }

    #[test]
    fn no_collections_refuses_scans() {
        assert!(NoCollections.scan("db", "c").is_err());
    }
}
