//! `$listLocalSessions`: the sessions the server has seen, as the server reports them
//! through [`crate::Collections::local_sessions`]. Without authentication every session
//! belongs to the same (empty) user, so the `allUsers` and `users` filters change nothing;
//! they are only checked.

use basalt_error::{Error, Result};
use basalt_expr::type_name;
use bson::Bson;

pub(crate) fn parse(spec: &Bson) -> Result<()> {
    let Bson::Document(options) = spec else {
        return Err(Error::type_mismatch(format!(
            "$listLocalSessions options must be specified in an object, but found: {}",
            type_name(Some(spec))
        )));
    };
    for (name, value) in options {
        let expected = match name.as_str() {
            "allUsers" => matches!(value, Bson::Boolean(_))
                .then_some(())
                .ok_or("bool"),
            "users" => matches!(value, Bson::Array(_)).then_some(()).ok_or("array"),
            _ => {
                return Err(Error::location(
                    40415,
                    format!("BSON field '$listLocalSessions.{name}' is an unknown field."),
                ))
            }
        };
        if let Err(expected) = expected {
            return Err(Error::type_mismatch(format!(
                "BSON field '$listLocalSessions.{name}' is the wrong type '{}', expected type '{expected}'",
                type_name(Some(value))
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use bson::{doc, Bson, Document};

    #[test]
    fn lists_what_the_server_reports() {
        let server = MemoryCollections::new("admin");
        let p = Pipeline::parse(
            &[
                doc! {"$listLocalSessions": {"allUsers": true}},
                doc! {"$project": {"_id": 0, "n": {"$literal": 1}}},
            ],
            None,
        )
        .unwrap();
        let out: Vec<Document> = p
            .stream(Box::new(std::iter::empty()), &server)
            .collect::<basalt_error::Result<_>>()
            .unwrap();
        assert_eq!(out, vec![doc! {"n": 1}]);
        let code = |spec: Bson| {
            Pipeline::parse(&[doc! {"$listLocalSessions": spec}], None)
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(Bson::Int32(1)), 14);
        assert_eq!(code(Bson::Document(doc! {"bogus": 1})), 40415);
        assert_eq!(code(Bson::Document(doc! {"allUsers": 1})), 14);
    }
}
