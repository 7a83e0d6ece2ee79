//! `$sample {size}`: a uniformly random sample of `size` input documents, without
//! repeats (all of them when there are fewer), in random order. One pass of reservoir
//! sampling keeps at most `size` documents in memory.

use crate::pipeline::DocumentStream;
use crate::stages::{drain, finished};
use basalt_error::{Error, Result};
use basalt_value::display::type_name;
use basalt_value::Number;
use bson::Bson;

/// `{size: n}`, its fields checked in order: an unknown option (28748), a size that is
/// not a number (28746); then a missing size (28749), and one that is not positive once
/// a double is truncated and a decimal rounded half to even (28747: zero, NaN and
/// negatives too).
pub(crate) fn parse(spec: &Bson) -> Result<u64> {
    let Bson::Document(spec) = spec else {
        return Err(Error::location(
            28745,
            "the $sample stage specification must be an object",
        ));
    };
    let mut size = None;
    for (name, value) in spec {
        if name != "size" {
            return Err(Error::location(
                28748,
                format!("unrecognized option to $sample: {name}"),
            ));
        }
        let n = Number::from_bson(value).ok_or_else(|| {
            Error::location(
                28746,
                format!(
                    "size argument to $sample must be a number, not {}",
                    type_name(value)
                ),
            )
        })?;
        size = Some(match n {
            Number::Decimal(d) => basalt_value::decimal_math::round_half_even(d),
            other => other.to_f64().trunc(),
        });
    }
    let size = size.ok_or_else(|| Error::location(28749, "$sample stage must specify a size"))?;
    // NaN is not positive either.
    if size.is_nan() || size < 1.0 {
        return Err(Error::location(
            28747,
            "size argument to $sample must be a positive integer",
        ));
    }
    // Saturating: a size past every collection's count takes every document.
    Ok(size as u64)
}

pub(crate) fn apply<'a>(size: u64, input: DocumentStream<'a>) -> DocumentStream<'a> {
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let mut reservoir = Vec::new();
    let mut seen = 0usize;
    let result = drain(input, |doc| {
        seen += 1;
        if reservoir.len() < size {
            reservoir.push(doc);
        } else {
            let slot = rand::random_range(0..seen);
            if slot < size {
                reservoir[slot] = doc;
            }
        }
        Ok(())
    });
    finished(result.map(|()| {
        // Fisher-Yates: the reservoir keeps arrival order for its first documents.
        for i in (1..reservoir.len()).rev() {
            reservoir.swap(i, rand::random_range(0..=i));
        }
        reservoir
    }))
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};
    use std::collections::BTreeSet;

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    fn numbered(n: i32) -> Vec<Document> {
        (0..n).map(|i| doc! {"i": i}).collect()
    }

    #[test]
    fn samples_distinct_documents() {
        let out = run(doc! {"$sample": {"size": 10}}, numbered(100)).unwrap();
        let distinct: BTreeSet<i32> = out.iter().map(|d| d.get_i32("i").unwrap()).collect();
        assert_eq!((out.len(), distinct.len()), (10, 10));
        assert_eq!(
            run(doc! {"$sample": {"size": 10}}, numbered(3))
                .unwrap()
                .len(),
            3
        );
        let sized = |size: bson::Bson| {
            run(doc! {"$sample": {"size": size}}, numbered(5)).map(|out| out.len())
        };
        assert_eq!(sized(1.9.into()).unwrap(), 1);
        let decimal = |s: &str| bson::Bson::Decimal128(s.parse().unwrap());
        assert_eq!(sized(decimal("1.5")).unwrap(), 2);
        assert_eq!(sized(decimal("2.5")).unwrap(), 2);
        assert_eq!(sized(f64::MAX.into()).unwrap(), 5);
        for zero in [0.into(), 0.5.into(), f64::NAN.into(), decimal("0.5")] {
            assert_eq!(sized(zero).unwrap_err().code.0, 28747);
        }
    }

    #[test]
    fn every_document_can_be_chosen() {
        // 400 draws of 1 from 4: each document is chosen about 100 times; a fixed choice
        // or a biased reservoir would leave one out.
        let mut counts = [0; 4];
        for _ in 0..400 {
            let out = run(doc! {"$sample": {"size": 1}}, numbered(4)).unwrap();
            counts[out[0].get_i32("i").unwrap() as usize] += 1;
        }
        assert!(counts.iter().all(|c| *c > 40), "{counts:?}");
    }

    #[test]
    fn sample_errors() {
        let code = |spec: bson::Bson| run(doc! {"$sample": spec}, vec![]).unwrap_err().code.0;
        assert_eq!(code(1.into()), 28745);
        assert_eq!(code(doc! {"size": "a"}.into()), 28746);
        assert_eq!(code(doc! {"size": -1}.into()), 28747);
        assert_eq!(code(doc! {"size": -1, "extra": 1}.into()), 28748);
        assert_eq!(code(doc! {"size": "a", "extra": 1}.into()), 28746);
        assert_eq!(code(doc! {"size": 1, "x": 1}.into()), 28748);
        assert_eq!(code(doc! {}.into()), 28749);
    }
}
