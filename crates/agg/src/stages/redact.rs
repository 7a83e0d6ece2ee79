//! `$redact`: evaluates an expression on the document, then on each embedded document
//! it keeps, and keeps (`$$KEEP`), removes (`$$PRUNE`) or descends into (`$$DESCEND`)
//! each. Documents inside arrays are redacted the same way; other array elements stay.
//!
//! The three variables stand for the strings "keep", "prune" and "descend", as in
//! MongoDB; they are substituted while parsing. As in MongoDB, `$$ROOT` and `$$CURRENT`
//! are the (sub)document being redacted.

use crate::pipeline::ExecContext;
use basalt_error::{Error, Result};
use basalt_expr::{Expression, ParseContext};
use basalt_value::display::value_to_string;
use bson::{doc, Bson, Document};

pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Expression> {
    Expression::parse(&substitute(spec), ctx)
}

/// Replaces `$$DESCEND`, `$$PRUNE` and `$$KEEP` by their values, outside `$literal`.
fn substitute(spec: &Bson) -> Bson {
    match spec {
        Bson::String(s) => match s.as_str() {
            "$$DESCEND" => Bson::Document(doc! {"$literal": "descend"}),
            "$$PRUNE" => Bson::Document(doc! {"$literal": "prune"}),
            "$$KEEP" => Bson::Document(doc! {"$literal": "keep"}),
            _ => spec.clone(),
        },
        Bson::Array(items) => Bson::Array(items.iter().map(substitute).collect()),
        Bson::Document(d) if d.contains_key("$literal") => spec.clone(),
        Bson::Document(d) => {
            Bson::Document(d.iter().map(|(k, v)| (k.clone(), substitute(v))).collect())
        }
        _ => spec.clone(),
    }
}

/// The redacted document, or `None` when it is pruned.
pub(crate) fn apply(
    expression: &Expression,
    doc: Document,
    ctx: ExecContext<'_>,
) -> Result<Option<Document>> {
    let decision = expression.evaluate(&doc, ctx.vars)?;
    match decision.as_ref().and_then(Bson::as_str) {
        Some("keep") => Ok(Some(doc)),
        Some("prune") => Ok(None),
        Some("descend") => {
            let mut out = Document::new();
            for (name, value) in doc {
                if let Some(value) = redact_value(expression, value, ctx)? {
                    out.insert(name, value);
                }
            }
            Ok(Some(out))
        }
        _ => Err(Error::location(
            17053,
            format!(
                "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                decision.as_ref().map_or("missing".to_string(), value_to_string)
            ),
        )),
    }
}

fn redact_value(
    expression: &Expression,
    value: Bson,
    ctx: ExecContext<'_>,
) -> Result<Option<Bson>> {
    Ok(match value {
        Bson::Document(d) => apply(expression, d, ctx)?.map(Bson::Document),
        Bson::Array(items) => {
            let mut kept = Vec::with_capacity(items.len());
            for item in items {
                if let Some(v) = redact_value(expression, item, ctx)? {
                    kept.push(v);
                }
            }
            Some(Bson::Array(kept))
        }
        other => Some(other),
    })
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    #[test]
    fn descends_and_prunes_by_level() {
        let input = vec![
            doc! {"level": 1, "a": {"level": 5, "x": 1}, "b": {"x": 2},
            "list": [{"level": 9}, {"level": 1, "y": 3}, 7]},
            doc! {"level": 6},
        ];
        let out = run(
            doc! {"$redact": {"$cond": [{"$gt": ["$level", 3]}, "$$PRUNE", "$$DESCEND"]}},
            input,
        )
        .unwrap();
        assert_eq!(
            out,
            vec![doc! {"level": 1, "b": {"x": 2}, "list": [{"level": 1, "y": 3}, 7]}]
        );
        let kept = run(doc! {"$redact": "$$KEEP"}, vec![doc! {"a": {"b": 1}}]).unwrap();
        assert_eq!(kept, vec![doc! {"a": {"b": 1}}]);
    }

    #[test]
    fn other_results_fail() {
        let err = run(doc! {"$redact": "$a"}, vec![doc! {"a": 1}]).unwrap_err();
        assert_eq!(err.code.0, 17053);
        let err = run(doc! {"$redact": {"$literal": "$$KEEP"}}, vec![doc! {}]).unwrap_err();
        assert_eq!(err.code.0, 17053);
    }
}
