//! `$indexStats`: one document per index of the collection the pipeline aggregates
//! (`name`, `key`, `host`, `accesses`, `spec`), as the server reports them. It takes an
//! empty object and must be the first stage.

use basalt_error::{Error, Result};
use basalt_value::display::value_to_string;
use bson::Bson;

pub(crate) fn parse(spec: &Bson) -> Result<()> {
    match spec {
        Bson::Document(d) if d.is_empty() => Ok(()),
        other => Err(Error::location(
            28803,
            format!(
                "The $indexStats stage specification must be an empty object, but found: {}",
                value_to_string(other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use bson::doc;

    #[test]
    fn lists_the_indexes() {
        let server = MemoryCollections::new("db");
        server.put("db", "c", vec![doc! {"a": 1}]);
        server.add_unique_index("db", "c", &["a"]);
        let pipeline =
            Pipeline::parse_aggregate(&[doc! {"$indexStats": {}}], None, false, None).unwrap();
        server.set_aggregated("c");
        let out: Vec<_> = pipeline
            .stream(Box::new(std::iter::empty()), &server)
            .collect::<basalt_error::Result<_>>()
            .unwrap();
        let names: Vec<&str> = out.iter().map(|d| d.get_str("name").unwrap()).collect();
        assert_eq!(names, vec!["_id_", "a_1"]);
        assert_eq!(
            Pipeline::parse(&[doc! {"$indexStats": {"x": 1}}], None)
                .unwrap_err()
                .code
                .0,
            28803
        );
        assert_eq!(
            Pipeline::parse(&[doc! {"$limit": 1}, doc! {"$indexStats": {}}], None)
                .unwrap_err()
                .code
                .0,
            40602
        );
    }
}
