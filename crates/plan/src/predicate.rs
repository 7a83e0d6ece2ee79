//! A small parsed view of a filter: the conditions on each top-level field that index
//! bounds can be built from. Anything else (`$ne`, `$regex`, `$elemMatch`, `$expr`, ...)
//! is kept only as "this field is constrained somehow", which gives no bounds.

use bson::{Bson, Document};

/// One condition on a field, as the planner understands it.
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    Eq(Bson),
    In(Vec<Bson>),
    Gt(Bson),
    Gte(Bson),
    Lt(Bson),
    Lte(Bson),
    Exists(bool),
    /// A condition no index bounds come from.
    Other,
}

/// The conditions a conjunctive filter puts on each field path.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Predicates {
    pub fields: Vec<(String, Vec<Condition>)>,
}

impl Predicates {
    /// The top-level conjunction of `filter`, with nested `$and`s flattened. `$or`,
    /// `$nor` and other top-level operators give no bounds.
    pub fn parse(filter: &Document) -> Predicates {
        let mut predicates = Predicates::default();
        predicates.add_conjunction(filter);
        predicates
    }

    fn add_conjunction(&mut self, filter: &Document) {
        for (name, value) in filter {
            if name == "$and" {
                if let Bson::Array(items) = value {
                    for item in items {
                        if let Bson::Document(d) = item {
                            self.add_conjunction(d);
                        }
                    }
                }
            } else if !name.starts_with('$') {
                let conditions = parse_field(value);
                match self.fields.iter_mut().find(|(path, _)| path == name) {
                    Some((_, existing)) => existing.extend(conditions),
                    None => self.fields.push((name.clone(), conditions)),
                }
            }
        }
    }

    pub fn conditions(&self, path: &str) -> &[Condition] {
        self.fields
            .iter()
            .find(|(p, _)| p == path)
            .map_or(&[], |(_, c)| c.as_slice())
    }
}

fn parse_field(value: &Bson) -> Vec<Condition> {
    let Bson::Document(d) = value else {
        return vec![Condition::Eq(value.clone())];
    };
    if !d.keys().next().is_some_and(|k| k.starts_with('$')) {
        return vec![Condition::Eq(value.clone())];
    }
    d.iter()
        .map(|(op, operand)| match op.as_str() {
            "$eq" => Condition::Eq(operand.clone()),
            "$gt" => Condition::Gt(operand.clone()),
            "$gte" => Condition::Gte(operand.clone()),
            "$lt" => Condition::Lt(operand.clone()),
            "$lte" => Condition::Lte(operand.clone()),
            "$in" => match operand {
                Bson::Array(items) => Condition::In(items.clone()),
                _ => Condition::Other,
            },
            "$exists" => Condition::Exists(truthy(operand)),
            _ => Condition::Other,
        })
        .collect()
}

pub(crate) fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        other => basalt_value::as_f64(other).is_none_or(|n| n != 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn flattens_and_and_reads_operators() {
        let p = Predicates::parse(&doc! {
            "a": 1,
            "$and": [{ "b": { "$gt": 2, "$lt": 5 } }, { "a": { "$in": [3] } }],
            "c": { "$regex": "x" },
            "d": { "x": 1 },
            "$or": [{ "e": 1 }],
        });
        assert_eq!(
            p.conditions("a"),
            &[
                Condition::Eq(Bson::Int32(1)),
                Condition::In(vec![Bson::Int32(3)])
            ]
        );
        assert_eq!(
            p.conditions("b"),
            &[Condition::Gt(Bson::Int32(2)), Condition::Lt(Bson::Int32(5))]
        );
        assert_eq!(p.conditions("c"), &[Condition::Other]);
        assert_eq!(
            p.conditions("d"),
            &[Condition::Eq(Bson::Document(doc! { "x": 1 }))]
        );
        assert!(p.conditions("e").is_empty());
    }
}
