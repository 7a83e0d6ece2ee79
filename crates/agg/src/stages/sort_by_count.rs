//! `$sortByCount`: groups by an expression and sorts the groups by size, descending —
//! MongoDB defines it as `$group {_id: <expr>, count: {$sum: 1}}` then `$sort {count: -1}`,
//! and it is parsed into exactly those stages.

use crate::stages::{group::Group, sort::Sort, Stage};
use basalt_error::{Error, Result};
use basalt_expr::ParseContext;
use bson::{doc, Bson};

pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Vec<Stage>> {
    let valid = match spec {
        Bson::String(s) => s.starts_with('$'),
        Bson::Document(d) => d.len() == 1 && d.keys().all(|k| k.starts_with('$')),
        _ => false,
    };
    if !valid {
        return Err(Error::location(
            40148,
            "the sortBy field must be defined as a $-prefixed path or an expression",
        ));
    }
    let group = Group::parse(
        &Bson::Document(doc! {"_id": spec.clone(), "count": {"$sum": 1}}),
        ctx,
    )?;
    // Sorts counts, never strings: no collation applies.
    let sort = Sort::parse(&Bson::Document(doc! {"count": -1}), None)?;
    Ok(vec![Stage::Group(group), Stage::Sort(sort)])
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc, Document};

    #[test]
    fn counts_and_sorts() {
        let input: Vec<Document> = ["a", "b", "b", "c", "b", "c"]
            .iter()
            .map(|t| doc! {"t": *t})
            .collect();
        let p = Pipeline::parse(&[doc! {"$sortByCount": "$t"}], None).unwrap();
        assert_eq!(
            p.run(input.into_iter().map(Ok)).unwrap(),
            vec![
                doc! {"_id": "b", "count": 3},
                doc! {"_id": "c", "count": 2},
                doc! {"_id": "a", "count": 1}
            ]
        );
        let code = |v| {
            Pipeline::parse(&[doc! {"$sortByCount": v}], None)
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(bson!("t")), 40148);
        assert_eq!(code(bson!({"a": 1})), 40148);
        assert_eq!(code(bson!(1)), 40148);
    }
}
