//! Pipeline stages, one file per stage. Each file parses its specification and adapts
//! the document stream; this module maps stage names to files.

mod add_fields;
mod bucket;
mod bucket_auto;
mod coll_stats;
pub(crate) mod count;
pub(crate) mod current_op;
mod densify;
mod documents;
mod facet;
mod fill;
pub(crate) mod geo_near;
mod graph_lookup;
pub(crate) mod group;
mod index_stats;
mod keyed_sort;
mod limit;
mod list_cluster_catalog;
mod list_sessions;
mod lookup;
mod match_stage;
mod merge;
mod out;
mod output;
mod plan_cache_stats;
mod project;
mod query_settings;
mod rank_fusion;
mod redact;
mod replace_root;
mod sample;
mod set_window_fields;
mod skip;
mod sort;
mod sort_by_count;
mod time_unit;
mod union_with;
pub mod unpack_bucket;
mod unwind;
mod window_functions;

use crate::pipeline::{DocumentStream, ExecContext, Place};
use crate::projection::Projection;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{Expression, ParseContext};
use bson::Document;

pub(crate) use match_stage::Match;

#[derive(Debug)]
pub(crate) enum Stage {
    Match(Box<Match>),
    /// `$project`, `$addFields`/`$set` and `$unset`.
    Project(Projection),
    Group(group::Group),
    Sort(sort::Sort),
    Skip(u64),
    Limit(u64),
    Count(String),
    Unwind(unwind::Unwind),
    ReplaceRoot(Expression),
    /// `$documents`: the expression giving the documents.
    Documents(Expression),
    ListLocalSessions(crate::pipeline::SessionUsers),
    ListSessions(crate::pipeline::SessionUsers),
    CurrentOp(current_op::CurrentOpOptions),
    /// `$querySettings`: whether to show each query shape.
    QuerySettings(bool),
    /// `$listClusterCatalog`: whether to list each collection's shards.
    ListClusterCatalog {
        shards: bool,
    },
    Lookup(Box<lookup::Lookup>),
    GraphLookup(Box<graph_lookup::GraphLookup>),
    UnionWith(Box<union_with::UnionWith>),
    Facet(facet::Facet),
    Out(output::Target),
    Merge(Box<merge::Merge>),
    BucketAuto(Box<bucket_auto::BucketAuto>),
    /// `$sample`: the sample size.
    Sample(u64),
    /// `$redact`: the expression deciding each (sub)document's fate.
    Redact(Expression),
    SetWindowFields(Box<set_window_fields::SetWindowFields>),
    Densify(Box<densify::Densify>),
    CollStats(coll_stats::CollStats),
    IndexStats,
    PlanCacheStats,
    /// `$_internalUnpackBucket`: a time-series collection's measurements.
    UnpackBucket(unpack_bucket::UnpackBucket),
    GeoNear(Box<geo_near::GeoNear>),
    RankFusion(Box<rank_fusion::RankFusion>),
}

impl Stage {
    /// Parses one stage; some stages (`$sortByCount`) stand for several.
    pub(crate) fn parse(spec: &Document, ctx: &ParseContext) -> Result<Vec<Stage>> {
        let mut fields = spec.iter();
        let (Some((name, args)), None) = (fields.next(), fields.next()) else {
            return Err(Error::location(
                40323,
                "A pipeline stage specification object must contain exactly one field.",
            ));
        };
        let stage = match name.as_str() {
            "$match" => Stage::Match(Box::new(Match::parse(args, ctx)?)),
            "$project" => Stage::Project(project::parse(args, ctx)?),
            "$unset" => Stage::Project(project::parse_unset(args)?),
            "$addFields" | "$set" => Stage::Project(add_fields::parse(name, args, ctx)?),
            "$group" => Stage::Group(group::Group::parse(args, ctx)?),
            "$sort" => Stage::Sort(sort::Sort::parse(args, ctx.collation())?),
            "$skip" => Stage::Skip(skip::parse(args)?),
            "$limit" => Stage::Limit(limit::parse(args)?),
            "$count" => Stage::Count(count::parse(args)?),
            "$unwind" => Stage::Unwind(unwind::Unwind::parse(args)?),
            "$_internalUnpackBucket" => {
                Stage::UnpackBucket(unpack_bucket::UnpackBucket::parse(args, ctx)?)
            }
            "$replaceRoot" | "$replaceWith" => {
                Stage::ReplaceRoot(replace_root::parse(name, args, ctx)?)
            }
            "$sortByCount" => return sort_by_count::parse(args, ctx),
            "$bucket" => return bucket::parse(args, ctx),
            "$bucketAuto" => {
                Stage::BucketAuto(Box::new(bucket_auto::BucketAuto::parse(args, ctx)?))
            }
            "$sample" => Stage::Sample(sample::parse(args)?),
            "$redact" => Stage::Redact(redact::parse(args, ctx)?),
            "$collStats" => Stage::CollStats(coll_stats::CollStats::parse(args)?),
            "$indexStats" => {
                index_stats::parse(args)?;
                Stage::IndexStats
            }
            "$planCacheStats" => {
                plan_cache_stats::parse(args)?;
                Stage::PlanCacheStats
            }
            "$geoNear" => Stage::GeoNear(Box::new(geo_near::GeoNear::parse(args, ctx)?)),
            "$densify" => Stage::Densify(Box::new(densify::Densify::parse(args)?)),
            "$fill" => return fill::parse(args, ctx),
            "$setWindowFields" => Stage::SetWindowFields(Box::new(
                set_window_fields::SetWindowFields::parse(args, ctx)?,
            )),
            "$documents" => Stage::Documents(documents::parse(args, ctx)?),
            "$listLocalSessions" => Stage::ListLocalSessions(list_sessions::parse(name, args)?),
            "$listSessions" => Stage::ListSessions(list_sessions::parse(name, args)?),
            "$currentOp" => Stage::CurrentOp(current_op::parse(args)?),
            "$querySettings" => Stage::QuerySettings(query_settings::parse(args)?),
            "$listClusterCatalog" => Stage::ListClusterCatalog {
                shards: list_cluster_catalog::parse(args)?,
            },
            "$lookup" => Stage::Lookup(Box::new(lookup::Lookup::parse(args, ctx)?)),
            "$graphLookup" => {
                Stage::GraphLookup(Box::new(graph_lookup::GraphLookup::parse(args, ctx)?))
            }
            "$unionWith" => Stage::UnionWith(Box::new(union_with::UnionWith::parse(args, ctx)?)),
            "$facet" => Stage::Facet(facet::Facet::parse(args, ctx)?),
            "$rankFusion" => {
                Stage::RankFusion(Box::new(rank_fusion::RankFusion::parse(args, ctx)?))
            }
            "$out" => Stage::Out(out::parse(args)?),
            "$merge" => Stage::Merge(Box::new(merge::Merge::parse(args, ctx)?)),
            "$listSearchIndexes" => return Err(Error::search_not_enabled()),
            other => {
                return Err(Error::location(
                    40324,
                    format!("Unrecognized pipeline stage name: '{other}'"),
                ))
            }
        };
        Ok(vec![stage])
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        match self {
            Stage::Match(m) => map_documents(input, move |doc| {
                Ok(m.matches(&doc, ctx.vars)?.then_some(doc))
            }),
            Stage::Project(p) => map_documents(input, move |doc| p.apply(doc, ctx.vars).map(Some)),
            Stage::Group(g) => g.apply(input, ctx),
            Stage::Sort(s) => s.apply(input, ctx),
            Stage::Skip(n) => skip::apply(*n, input),
            Stage::Limit(n) => limit::apply(*n, input),
            Stage::Count(name) => count::apply(name, input),
            Stage::Unwind(u) => u.apply(input),
            Stage::UnpackBucket(u) => u.apply(input),
            Stage::ReplaceRoot(e) => map_documents(input, move |doc| {
                replace_root::apply(e, &doc, ctx.vars).map(Some)
            }),
            Stage::Documents(e) => finished(documents::evaluate(e, ctx.vars)),
            Stage::ListLocalSessions(users) => list_sessions::local(users, ctx),
            Stage::ListSessions(users) => list_sessions::stored(users, input, ctx),
            Stage::CurrentOp(options) => finished(current_op::run(ctx, options)),
            Stage::QuerySettings(debug_shape) => finished(query_settings::run(ctx, *debug_shape)),
            Stage::ListClusterCatalog { shards } => {
                finished(ctx.collections.cluster_catalog(*shards))
            }
            Stage::Lookup(l) => l.apply(input, ctx),
            Stage::GraphLookup(g) => g.apply(input, ctx),
            Stage::UnionWith(u) => u.apply(input, ctx),
            Stage::Facet(f) => f.apply(input, ctx),
            Stage::Out(target) => finished(out::run(target, input, ctx).map(|()| Vec::new())),
            Stage::Merge(m) => finished(m.run(input, ctx).map(|()| Vec::new())),
            Stage::BucketAuto(b) => b.apply(input, ctx),
            Stage::Sample(size) => sample::apply(*size, input),
            Stage::Redact(e) => map_documents(input, move |doc| redact::apply(e, doc, ctx)),
            Stage::SetWindowFields(s) => s.apply(input, ctx),
            Stage::Densify(d) => d.apply(input, ctx),
            Stage::CollStats(c) => finished(c.run(ctx)),
            Stage::IndexStats => finished(ctx.collections.index_stats()),
            Stage::PlanCacheStats => finished(ctx.collections.plan_cache_stats()),
            Stage::GeoNear(g) => g.apply(input),
            Stage::RankFusion(r) => r.apply(input, ctx),
        }
    }

    /// Whether the stage handles each input document on its own, needing nothing from
    /// other documents or collections: such stages can run on partitions of the input
    /// in parallel.
    pub(crate) fn is_per_document(&self) -> bool {
        matches!(
            self,
            Stage::Match(_)
                | Stage::Project(_)
                | Stage::ReplaceRoot(_)
                | Stage::Unwind(_)
                | Stage::Redact(_)
                | Stage::UnpackBucket(_)
        )
    }

    /// Whether the stage makes its own documents and ignores its input.
    pub(crate) fn is_source(&self) -> bool {
        matches!(
            self,
            Stage::Documents(_)
                | Stage::ListLocalSessions(_)
                | Stage::CurrentOp(_)
                | Stage::ListClusterCatalog { .. }
        )
    }
}

/// Stages that make their own documents, which a database-level aggregation
/// (`aggregate: 1`) starts with.
fn is_collectionless_source(name: &str) -> bool {
    matches!(
        name,
        "$documents"
            | "$listLocalSessions"
            | "$currentOp"
            | "$listClusterCatalog"
            | "$querySettings"
    )
}

/// A database-level aggregation must start with a stage that makes its own documents,
/// and a collection's aggregation must not.
fn check_namespace(first_stage: &str, collectionless: bool) -> Result<()> {
    if first_stage == "$listClusterCatalog" && !collectionless {
        return Err(Error::location(
            9621301,
            "$listClusterCatalog must be run against the database, not a collection",
        ));
    }
    let message = match (collectionless, is_collectionless_source(first_stage)) {
        (true, false) => {
            format!("{{aggregate: 1}} is not valid for '{first_stage}'; a collection is required.")
        }
        (false, true) => format!("'{first_stage}' can only be run with {{aggregate: 1}}"),
        _ => return Ok(()),
    };
    Err(Error::new(ErrorCode::INVALID_NAMESPACE, message))
}

/// Checks that the stage `name` may stand at `position` of `count` stages running at
/// `place`, with MongoDB's errors.
pub(crate) fn check_placement(
    name: &str,
    position: usize,
    count: usize,
    place: Place,
) -> Result<()> {
    let writes = matches!(name, "$out" | "$merge");
    let source = is_collectionless_source(name);
    // Stages that report on the server or the aggregated collection stand first.
    let first_only = source
        || matches!(
            name,
            "$collStats" | "$indexStats" | "$listSessions" | "$planCacheStats"
        );
    // `$rankFusion` checks its pipelines' stages itself: only selections are allowed.
    if place == Place::RankFusion {
        return Ok(());
    }
    if name == "$geoNear" {
        if place == Place::Facet {
            return Err(Error::location(
                40600,
                "$geoNear is not allowed to be used within a $facet stage",
            ));
        }
        if position != 0 {
            return Err(Error::location(
                40603,
                "$geoNear was not the first stage in the pipeline.",
            ));
        }
    }
    if let (Place::Aggregate { collectionless }, 0) = (place, position) {
        check_namespace(name, collectionless)?;
    }
    let refused = match place {
        Place::Top | Place::Aggregate { .. } => None,
        // It lists the server's settings, which no collection's pipeline reads.
        Place::Lookup | Place::UnionWith if name == "$querySettings" => Some((
            ErrorCode::INVALID_NAMESPACE.0,
            format!("{name} must be run with {{aggregate: 1}}"),
        )),
        Place::Lookup if writes || (first_only && name != "$documents") => Some((
            51047,
            format!("{name} is not allowed within a $lookup's sub-pipeline"),
        )),
        Place::UnionWith if writes || (first_only && name != "$documents") => Some((
            31441,
            format!("{name} is not allowed within a $unionWith's sub-pipeline"),
        )),
        Place::Facet if writes || first_only || name == "$facet" => Some((
            40600,
            format!("{name} is not allowed to be used within a $facet stage"),
        )),
        Place::Update
            if !matches!(
                name,
                "$addFields" | "$set" | "$project" | "$unset" | "$replaceRoot" | "$replaceWith"
            ) =>
        {
            Some((
                ErrorCode::INVALID_OPTIONS.0,
                format!("{name} is not allowed to be used within an update"),
            ))
        }
        Place::Lookup | Place::UnionWith | Place::Facet | Place::Update | Place::RankFusion => None,
    };
    if let Some((code, message)) = refused {
        return Err(Error::location(code, message));
    }
    if first_only && position != 0 {
        return Err(Error::location(
            40602,
            format!("{name} is only valid as the first stage in a pipeline"),
        ));
    }
    if writes && position + 1 != count {
        return Err(Error::location(
            40601,
            format!("{name} can only be the final stage in the pipeline"),
        ));
    }
    Ok(())
}

/// The names of a stage's pipelines (`$facet`'s, `$rankFusion`'s) follow the rules of
/// field names: not empty, no `$` first, no `.`.
pub(crate) fn check_pipeline_name(stage: &str, name: &str) -> Result<()> {
    let refused = if name.is_empty() {
        Some((
            15998,
            "FieldPath field names may not be empty strings.".to_string(),
        ))
    } else if name.starts_with('$') {
        Some((
            16410,
            format!("FieldPath field names may not start with '$'. Given FieldPath: {name}"),
        ))
    } else if name.contains('.') {
        Some((
            16412,
            format!("FieldPath field names may not contain '.'. Given FieldPath: {name}"),
        ))
    } else {
        None
    };
    match refused {
        Some((code, why)) => Err(Error::new(
            ErrorCode::location(code),
            format!(
                "{stage} pipeline names must follow the naming rules of field path \
                 expressions. :: caused by :: {why}"
            ),
        )),
        None => Ok(()),
    }
}

/// A streaming stage: each input document becomes zero or one output document. Errors
/// from upstream pass through.
pub(crate) fn map_documents<'a>(
    input: DocumentStream<'a>,
    mut f: impl FnMut(Document) -> Result<Option<Document>> + Send + 'a,
) -> DocumentStream<'a> {
    Box::new(input.filter_map(move |item| match item {
        Ok(doc) => f(doc).transpose(),
        Err(e) => Some(Err(e)),
    }))
}

/// Drains a stream for a blocking stage, stopping at the first error.
fn drain(input: DocumentStream<'_>, mut f: impl FnMut(Document) -> Result<()>) -> Result<()> {
    for item in input {
        f(item?)?;
    }
    Ok(())
}

/// Every document of `input`, kept for a stage that reads them several times (`$facet`,
/// `$rankFusion`), within the server's memory budget (ExceededMemoryLimit beyond it);
/// the reservation holds their memory for as long as the caller keeps it.
fn buffered(
    input: DocumentStream<'_>,
    stage: &str,
) -> Result<(Vec<Document>, basalt_memory::Reservation)> {
    let mut docs = Vec::new();
    let mut memory = basalt_memory::Reservation::default();
    drain(input, |doc| {
        memory.reserve_for(basalt_value::document_memory_bytes(&doc), stage)?;
        docs.push(doc);
        Ok(())
    })?;
    Ok((docs, memory))
}

/// The output of a blocking stage: its documents, or the error that stopped it.
pub(crate) fn finished<'a>(result: Result<Vec<Document>>) -> DocumentStream<'a> {
    match result {
        Ok(docs) => Box::new(docs.into_iter().map(Ok)),
        Err(e) => Box::new(std::iter::once(Err(e))),
    }
}
