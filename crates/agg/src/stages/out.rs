//! `$out`: writes the pipeline's results to a collection, replacing what it held. The
//! server writes them to a temporary collection and renames it over the target only when
//! all are written, so a failure leaves the old target as it was (see
//! [`crate::Collections::replace_collection`]). With `timeseries` options the target is
//! a time-series collection (made with them, or an existing one with the same). It is
//! the last stage and outputs nothing.

use crate::pipeline::{DocumentStream, ExecContext};
use crate::stages::output::{Target, Writer};
use basalt_error::{Error, Result};
use basalt_expr::type_name;
use bson::Bson;

pub(crate) fn parse(spec: &Bson) -> Result<Target> {
    match spec {
        Bson::String(coll) => Ok(Target::in_command_database(coll)),
        Bson::Document(d) => {
            // The time-series options are the server's to check (as `create`'s).
            let mut rest = d.clone();
            let timeseries = match rest.remove("timeseries") {
                None | Some(Bson::Null) => None,
                Some(Bson::Document(options)) => Some(options),
                Some(other) => {
                    return Err(Error::type_mismatch(format!(
                    "BSON field '$out.timeseries' is the wrong type '{}', expected type 'object'",
                    type_name(Some(&other))
                )))
                }
            };
            let mut target = Target::parse_object(&rest, "$out", true)?;
            target.timeseries = timeseries;
            Ok(target)
        }
        other => Err(Error::location(
            16990,
            format!(
                "$out only supports a string or object argument, but found {}",
                type_name(Some(other))
            ),
        )),
    }
}

pub(crate) fn run(target: &Target, input: DocumentStream<'_>, ctx: ExecContext<'_>) -> Result<()> {
    let (db, coll) = target.resolve(Writer::Out, ctx.collections)?;
    let mut input = input;
    ctx.collections
        .replace_collection(db, coll, target.timeseries.as_ref(), &mut input)
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use basalt_error::{Error, Result};
    use bson::{doc, Document};

    fn run(
        server: &MemoryCollections,
        stages: Vec<Document>,
        input: Vec<Document>,
    ) -> Result<Vec<Document>> {
        let p = Pipeline::parse(&stages, None)?;
        let out = p
            .stream(Box::new(input.into_iter().map(Ok)), server)
            .collect();
        out
    }

    #[test]
    fn replaces_the_target() {
        let server = MemoryCollections::new("test");
        server.put("test", "target", vec![doc! {"_id": "old"}]);
        let out = run(
            &server,
            vec![doc! {"$match": {"a": {"$gt": 1}}}, doc! {"$out": "target"}],
            vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}],
        )
        .unwrap();
        assert!(out.is_empty(), "$out outputs nothing");
        assert_eq!(server.get("test", "target"), vec![doc! {"_id": 2, "a": 2}]);
        run(
            &server,
            vec![doc! {"$out": {"db": "other", "coll": "copy"}}],
            vec![doc! {"_id": 3}],
        )
        .unwrap();
        assert_eq!(server.get("other", "copy"), vec![doc! {"_id": 3}]);
    }

    #[test]
    fn a_failing_input_leaves_the_target() {
        let server = MemoryCollections::new("test");
        server.put("test", "target", vec![doc! {"_id": "old"}]);
        let p = Pipeline::parse(&[doc! {"$out": "target"}], None).unwrap();
        let input = vec![Ok(doc! {"_id": 1}), Err(Error::internal("disk"))];
        let result: Result<Vec<Document>> =
            p.stream(Box::new(input.into_iter()), &server).collect();
        assert_eq!(result.unwrap_err().message, "disk");
        assert_eq!(server.get("test", "target"), vec![doc! {"_id": "old"}]);
    }

    #[test]
    fn out_errors() {
        let server = MemoryCollections::new("test");
        let code = |stages: Vec<Document>| run(&server, stages, vec![]).unwrap_err().code.0;
        assert_eq!(code(vec![doc! {"$out": "a"}, doc! {"$match": {}}]), 40601);
        assert_eq!(code(vec![doc! {"$out": 1}]), 16990);
        assert_eq!(code(vec![doc! {"$out": {"coll": "a"}}]), 40414);
        assert_eq!(code(vec![doc! {"$out": {"db": "a"}}]), 40414);
        assert_eq!(code(vec![doc! {"$out": {"db": "a", "coll": 1}}]), 14);
        assert_eq!(
            code(vec![doc! {"$out": {"db": "a", "coll": "b", "x": 1}}]),
            40415
        );
        assert_eq!(code(vec![doc! {"$out": "system.views"}]), 17385);
        assert_eq!(
            code(vec![doc! {"$out": {"db": "admin", "coll": "b"}}]),
            31321
        );
        assert_eq!(code(vec![doc! {"$facet": {"f": [{"$out": "a"}]}}]), 40600);
        assert_eq!(
            code(vec![
                doc! {"$lookup": {"from": "b", "pipeline": [{"$out": "a"}], "as": "x"}}
            ]),
            51047
        );
        assert_eq!(
            code(vec![
                doc! {"$unionWith": {"coll": "b", "pipeline": [{"$out": "a"}]}}
            ]),
            31441
        );
    }
}
