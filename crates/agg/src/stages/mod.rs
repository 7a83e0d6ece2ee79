//! Pipeline stages, one file per stage. Each file parses its specification and adapts
//! the document stream; this module maps stage names to files.

mod add_fields;
mod count;
mod group;
mod limit;
mod match_stage;
mod project;
mod replace_root;
mod skip;
mod sort;
mod sort_by_count;
mod unwind;

use crate::pipeline::{DocumentStream, ExecContext};
use crate::projection::Projection;
use basalt_error::{Error, Result};
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
            "$sort" => Stage::Sort(sort::Sort::parse(args)?),
            "$skip" => Stage::Skip(skip::parse(args)?),
            "$limit" => Stage::Limit(limit::parse(args)?),
            "$count" => Stage::Count(count::parse(args)?),
            "$unwind" => Stage::Unwind(unwind::Unwind::parse(args)?),
            "$replaceRoot" | "$replaceWith" => {
                Stage::ReplaceRoot(replace_root::parse(name, args, ctx)?)
            }
            "$sortByCount" => return sort_by_count::parse(args, ctx),
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
            Stage::Sort(s) => s.apply(input),
            Stage::Skip(n) => skip::apply(*n, input),
            Stage::Limit(n) => limit::apply(*n, input),
            Stage::Count(name) => count::apply(name, input),
            Stage::Unwind(u) => u.apply(input),
            Stage::ReplaceRoot(e) => map_documents(input, move |doc| {
                replace_root::apply(e, &doc, ctx.vars).map(Some)
            }),
        }
    }
}

/// A streaming stage: each input document becomes zero or one output document. Errors
/// from upstream pass through.
fn map_documents<'a>(
    input: DocumentStream<'a>,
    mut f: impl FnMut(Document) -> Result<Option<Document>> + 'a,
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

/// The output of a blocking stage: its documents, or the error that stopped it.
fn finished<'a>(result: Result<Vec<Document>>) -> DocumentStream<'a> {
    match result {
        Ok(docs) => Box::new(docs.into_iter().map(Ok)),
        Err(e) => Box::new(std::iter::once(Err(e))),
    }
}
