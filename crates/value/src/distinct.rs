//! A set of values with MongoDB's notion of "the same value", for `distinct` and the like:
//! numbers are equal across types (`1`, `1.0` and `NumberLong(1)` are one value), and under
//! a collation so are strings that compare equal (`"PING"` and `"ping"` at strength 2).

use crate::collation::Collation;
use crate::compare::compare_values_with;
use crate::path::{FieldPath, Reached};
use bson::{Bson, Document};

/// Distinct values kept in MongoDB's order. Of values that are the same, the first one
/// inserted stands for all of them, as in MongoDB.
#[derive(Debug)]
pub struct DistinctValues<'a> {
    values: Vec<Bson>,
    collation: Option<&'a Collation>,
}

impl<'a> DistinctValues<'a> {
    pub fn new(collation: Option<&'a Collation>) -> DistinctValues<'a> {
        DistinctValues {
            values: Vec::new(),
            collation,
        }
    }

    /// Adds `value` unless the same value is already there (it is cloned only when new).
    pub fn insert(&mut self, value: &Bson) {
        let found = self
            .values
            .binary_search_by(|v| compare_values_with(v, value, self.collation));
        if let Err(position) = found {
            self.values.insert(position, value.clone());
        }
    }

    /// Adds the values `path` reaches in `doc`, an array's by its elements.
    pub fn insert_reached(&mut self, path: &FieldPath, doc: &Document) {
        for reached in path.reached(doc) {
            let Reached::Value { value, .. } = reached else {
                continue;
            };
            match value {
                Bson::Array(items) => items.iter().for_each(|item| self.insert(item)),
                other => self.insert(other),
            }
        }
    }

    /// The values, in MongoDB's order under the collation.
    pub fn into_vec(self) -> Vec<Bson> {
        self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn first_of_equal_values_stands_for_them() {
        let mut binary = DistinctValues::new(None);
        for v in [
            Bson::from("PING"),
            Bson::from(1),
            Bson::from("ping"),
            Bson::from(1.0),
        ] {
            binary.insert(&v);
        }
        assert_eq!(
            binary.into_vec(),
            vec![Bson::from(1), Bson::from("PING"), Bson::from("ping")]
        );

        let collation = Collation::parse(&doc! {"locale": "en_US", "strength": 2})
            .unwrap()
            .unwrap();
        let mut collated = DistinctValues::new(Some(&collation));
        for v in ["PING", "ping", "Pong", "péng"] {
            collated.insert(&Bson::from(v));
        }
        assert_eq!(
            collated.into_vec(),
            vec![Bson::from("péng"), Bson::from("PING"), Bson::from("Pong")]
        );
    }
}
