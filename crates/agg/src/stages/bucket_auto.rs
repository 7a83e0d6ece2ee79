//! `$bucketAuto`: sorts documents by a `groupBy` value and cuts them into `buckets`
//! ranges of about equal size, each output as `{_id: {min, max}, <output fields>}`.
//!
//! MongoDB's algorithm, step for step: every bucket takes `round(n / buckets)` documents
//! (at least one; the last bucket takes all that remain), then every following document
//! with the same value as its last, so equal values never straddle two buckets. A bucket's
//! `max` is the next bucket's `min` (the last one's is its largest value). With a
//! `granularity` (a preferred-number series or `POWERSOF2`) boundaries are rounded to the
//! series and the documents now below a rounded boundary join its bucket. Accumulators
//! see each bucket's documents in input order. The documents are sorted through a sort
//! that spills past 100 MB (`keyed_sort.rs`); one bucket is held in memory at a time.

use crate::pipeline::{DocumentStream, ExecContext};
use crate::stages::bucket::{default_output, parse_group_by};
use crate::stages::keyed_sort::{KeyedDocuments, KeyedSort};
use crate::stages::{drain, finished};
use basalt_error::{Error, Result};
use basalt_expr::{AccumulatorSpec, Expression, ParseContext};
use basalt_value::display::type_name;
use basalt_value::{compare_values, Number};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

#[derive(Debug)]
pub(crate) struct BucketAuto {
    group_by: Expression,
    buckets: usize,
    granularity: Option<Granularity>,
    output: Vec<(String, AccumulatorSpec)>,
}

impl BucketAuto {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<BucketAuto> {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                40240,
                format!(
                    "The argument to $bucketAuto must be an object, but found type: {}",
                    type_name(spec)
                ),
            ));
        };
        let (mut group_by, mut buckets, mut granularity, mut output) = (None, None, None, None);
        for (name, value) in spec {
            match name.as_str() {
                "groupBy" => {
                    let spec = parse_group_by(value, 40239, "$bucketAuto", "an expression object")?;
                    group_by = Some(Expression::parse(&spec, ctx)?);
                }
                "buckets" => buckets = Some(parse_buckets(value)?),
                "output" => match value {
                    Bson::Document(fields) => output = Some(fields.clone()),
                    other => {
                        return Err(Error::location(
                            40244,
                            format!(
                            "The $bucketAuto 'output' field must be an object, but found type: {}",
                            type_name(other)
                        ),
                        ))
                    }
                },
                "granularity" => granularity = Some(Granularity::parse(value)?),
                _ => {
                    return Err(Error::location(
                        40245,
                        format!("Unrecognized option to $bucketAuto: {name}"),
                    ))
                }
            }
        }
        let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
            return Err(Error::location(
                40246,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        };
        let output = output
            .filter(|o| !o.is_empty())
            .unwrap_or_else(default_output)
            .iter()
            .map(|(name, spec)| Ok((name.clone(), AccumulatorSpec::parse(name, spec, ctx)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(BucketAuto {
            group_by,
            buckets,
            granularity,
            output,
        })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let buckets =
            KeyedSort::new(ctx.collections.spill_directory(), None).and_then(|mut sort| {
                let mut count = 0usize;
                drain(input, |doc| {
                    let key = self
                        .group_by
                        .evaluate(&doc, ctx.vars)?
                        .unwrap_or(Bson::Null);
                    if self.granularity.is_some() {
                        check_roundable(&key, 40258, 40259, 40260)?;
                    }
                    // The input position travels along: accumulators see input order.
                    sort.push(key, doc! {"p": count as i64, "d": doc})?;
                    count += 1;
                    Ok(())
                })?;
                self.bucketize(count, &mut sort.finish()?, ctx)
            });
        finished(buckets)
    }

    /// Cuts the `count` documents, sorted by value, into buckets.
    fn bucketize(
        &self,
        count: usize,
        sorted: &mut KeyedDocuments,
        ctx: ExecContext<'_>,
    ) -> Result<Vec<Document>> {
        let size = ((count as f64 / self.buckets as f64).round() as usize).max(1);
        let mut out = Vec::new();
        let mut previous_max: Option<Bson> = None;
        while out.len() < self.buckets {
            let Some(first) = sorted.peek_key()? else {
                break;
            };
            let last_bucket = out.len() + 1 == self.buckets;
            let mut members = Vec::new();
            let mut max = first.clone();
            while last_bucket || members.len() < size {
                let Some(key) = sorted.peek_key()? else {
                    break;
                };
                max = key;
                members.extend(sorted.next_document()?);
            }
            let mut min = first;
            let mut take_while =
                |sorted: &mut KeyedDocuments, keep: &dyn Fn(&Bson) -> bool| -> Result<()> {
                    while let Some(next) = sorted.peek_key()? {
                        if !keep(&next) {
                            break;
                        }
                        members.extend(sorted.next_document()?);
                    }
                    Ok(())
                };
            match &self.granularity {
                Some(g) => {
                    min = match previous_max.take() {
                        Some(m) => m,
                        None => g.round_down(&min)?,
                    };
                    let boundary = g.round_up(&max)?;
                    take_while(sorted, &|next| {
                        compare_values(&boundary, next) == Ordering::Greater
                            || compare_values(&max, next) == Ordering::Equal
                    })?;
                    max = match sorted.peek_key()? {
                        Some(next) if as_f64(&boundary) == 0.0 => g.round_down(&next)?,
                        _ => boundary,
                    };
                    previous_max = Some(max.clone());
                }
                None => {
                    take_while(sorted, &|next| {
                        compare_values(&max, next) == Ordering::Equal
                    })?;
                    if let Some(next) = sorted.peek_key()? {
                        max = next;
                    }
                }
            }
            members.sort_by_key(|member| member.get_i64("p").unwrap_or(0));
            let mut bucket = doc! {"_id": {"min": min, "max": max}};
            for (name, spec) in &self.output {
                let mut acc = spec.new_accumulator();
                for member in &members {
                    let doc = member.get_document("d").map_err(|_| {
                        Error::internal("a sorted $bucketAuto document lost its body")
                    })?;
                    acc.accumulate(spec.argument.evaluate_ref(doc, ctx.vars)?.as_deref())?;
                }
                bucket.insert(name.clone(), acc.finish()?);
            }
            out.push(bucket);
        }
        Ok(out)
    }
}

fn parse_buckets(value: &Bson) -> Result<usize> {
    let n = Number::from_bson(value).ok_or_else(|| {
        Error::location(
            40241,
            format!(
                "The $bucketAuto 'buckets' field must be a numeric value, but found type: {}",
                type_name(value)
            ),
        )
    })?;
    let n = n.to_f64();
    if n.fract() != 0.0 || n < i32::MIN as f64 || n > i32::MAX as f64 {
        return Err(Error::location(
            40242,
            format!(
                "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found {n}"
            ),
        ));
    }
    if n <= 0.0 {
        return Err(Error::location(
            40243,
            format!("The $bucketAuto 'buckets' field must be greater than 0, but found: {n}"),
        ));
    }
    Ok(n as usize)
}

fn as_f64(value: &Bson) -> f64 {
    Number::from_bson(value).map_or(f64::NAN, Number::to_f64)
}

/// A value rounded by a granularity must be a non-negative number (codes per caller).
fn check_roundable(value: &Bson, not_number: i32, nan: i32, negative: i32) -> Result<f64> {
    let Some(n) = Number::from_bson(value).map(Number::to_f64) else {
        let message = if not_number == 40262 {
            "A granularity rounder can only round numeric values, but found type: "
        } else {
            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value with type: "
        };
        return Err(Error::location(
            not_number,
            format!("{message}{}", type_name(value)),
        ));
    };
    if n.is_nan() {
        return Err(Error::location(
            nan,
            "A granularity rounder cannot round NaN",
        ));
    }
    if n < 0.0 {
        return Err(Error::location(
            negative,
            "A granularity rounder can only round non-negative numbers",
        ));
    }
    Ok(n)
}

/// A series that bucket boundaries are rounded to.
#[derive(Debug)]
enum Granularity {
    /// A preferred-number series: the values of one decade, repeated at every power of 10.
    Preferred(&'static [f64]),
    PowersOf2,
}

const R5: &[f64] = &[10.0, 16.0, 25.0, 40.0, 63.0];
const R10: &[f64] = &[
    100.0, 125.0, 160.0, 200.0, 250.0, 315.0, 400.0, 500.0, 630.0, 800.0,
];
const R20: &[f64] = &[
    100.0, 112.0, 125.0, 140.0, 160.0, 180.0, 200.0, 224.0, 250.0, 280.0, 315.0, 355.0, 400.0,
    450.0, 500.0, 560.0, 630.0, 710.0, 800.0, 900.0,
];
const R40: &[f64] = &[
    100.0, 106.0, 112.0, 118.0, 125.0, 132.0, 140.0, 150.0, 160.0, 170.0, 180.0, 190.0, 200.0,
    212.0, 224.0, 236.0, 250.0, 265.0, 280.0, 300.0, 315.0, 355.0, 375.0, 400.0, 425.0, 450.0,
    475.0, 500.0, 530.0, 560.0, 600.0, 630.0, 670.0, 710.0, 750.0, 800.0, 850.0, 900.0, 950.0,
];
const R80: &[f64] = &[
    103.0, 109.0, 115.0, 122.0, 128.0, 136.0, 145.0, 155.0, 165.0, 175.0, 185.0, 195.0, 206.0,
    218.0, 230.0, 243.0, 258.0, 272.0, 290.0, 307.0, 325.0, 345.0, 365.0, 387.0, 412.0, 437.0,
    462.0, 487.0, 515.0, 545.0, 575.0, 615.0, 650.0, 690.0, 730.0, 775.0, 825.0, 875.0, 925.0,
    975.0,
];
const SERIES_1_2_5: &[f64] = &[10.0, 20.0, 50.0];
const E6: &[f64] = &[10.0, 15.0, 22.0, 33.0, 47.0, 68.0];
const E12: &[f64] = &[
    10.0, 12.0, 15.0, 18.0, 22.0, 27.0, 33.0, 39.0, 47.0, 56.0, 68.0, 82.0,
];
const E24: &[f64] = &[
    10.0, 11.0, 12.0, 13.0, 15.0, 16.0, 18.0, 20.0, 22.0, 24.0, 27.0, 30.0, 33.0, 36.0, 39.0, 43.0,
    47.0, 51.0, 56.0, 62.0, 68.0, 75.0, 82.0, 91.0,
];
const E48: &[f64] = &[
    100.0, 105.0, 110.0, 115.0, 121.0, 127.0, 133.0, 140.0, 147.0, 154.0, 162.0, 169.0, 178.0,
    187.0, 196.0, 205.0, 215.0, 226.0, 237.0, 249.0, 261.0, 274.0, 287.0, 301.0, 316.0, 332.0,
    348.0, 365.0, 383.0, 402.0, 422.0, 442.0, 464.0, 487.0, 511.0, 536.0, 562.0, 590.0, 619.0,
    649.0, 681.0, 715.0, 750.0, 787.0, 825.0, 866.0, 909.0, 953.0,
];
const E96: &[f64] = &[
    100.0, 102.0, 105.0, 107.0, 110.0, 113.0, 115.0, 118.0, 121.0, 124.0, 127.0, 130.0, 133.0,
    137.0, 140.0, 143.0, 147.0, 150.0, 154.0, 158.0, 162.0, 165.0, 169.0, 174.0, 178.0, 182.0,
    187.0, 191.0, 196.0, 200.0, 205.0, 210.0, 215.0, 221.0, 226.0, 232.0, 237.0, 243.0, 249.0,
    255.0, 261.0, 267.0, 274.0, 280.0, 287.0, 294.0, 301.0, 309.0, 316.0, 324.0, 332.0, 340.0,
    348.0, 357.0, 365.0, 374.0, 383.0, 392.0, 402.0, 412.0, 422.0, 432.0, 442.0, 453.0, 464.0,
    475.0, 487.0, 499.0, 511.0, 523.0, 536.0, 549.0, 562.0, 576.0, 590.0, 604.0, 619.0, 634.0,
    649.0, 665.0, 681.0, 698.0, 715.0, 732.0, 750.0, 768.0, 787.0, 806.0, 825.0, 845.0, 866.0,
    887.0, 909.0, 931.0, 953.0, 976.0,
];
const E192: &[f64] = &[
    100.0, 101.0, 102.0, 104.0, 105.0, 106.0, 107.0, 109.0, 110.0, 111.0, 113.0, 114.0, 115.0,
    117.0, 118.0, 120.0, 121.0, 123.0, 124.0, 126.0, 127.0, 129.0, 130.0, 132.0, 133.0, 135.0,
    137.0, 138.0, 140.0, 142.0, 143.0, 145.0, 147.0, 149.0, 150.0, 152.0, 154.0, 156.0, 158.0,
    160.0, 162.0, 164.0, 165.0, 167.0, 169.0, 172.0, 174.0, 176.0, 178.0, 180.0, 182.0, 184.0,
    187.0, 189.0, 191.0, 193.0, 196.0, 198.0, 200.0, 203.0, 205.0, 208.0, 210.0, 213.0, 215.0,
    218.0, 221.0, 223.0, 226.0, 229.0, 232.0, 234.0, 237.0, 240.0, 243.0, 246.0, 249.0, 252.0,
    255.0, 258.0, 261.0, 264.0, 267.0, 271.0, 274.0, 277.0, 280.0, 284.0, 287.0, 291.0, 294.0,
    298.0, 301.0, 305.0, 309.0, 312.0, 316.0, 320.0, 324.0, 328.0, 332.0, 336.0, 340.0, 344.0,
    348.0, 352.0, 357.0, 361.0, 365.0, 370.0, 374.0, 379.0, 383.0, 388.0, 392.0, 397.0, 402.0,
    407.0, 412.0, 417.0, 422.0, 427.0, 432.0, 437.0, 442.0, 448.0, 453.0, 459.0, 464.0, 470.0,
    475.0, 481.0, 487.0, 493.0, 499.0, 505.0, 511.0, 517.0, 523.0, 530.0, 536.0, 542.0, 549.0,
    556.0, 562.0, 569.0, 576.0, 583.0, 590.0, 597.0, 604.0, 612.0, 619.0, 626.0, 634.0, 642.0,
    649.0, 657.0, 665.0, 673.0, 681.0, 690.0, 698.0, 706.0, 715.0, 723.0, 732.0, 741.0, 750.0,
    759.0, 768.0, 777.0, 787.0, 796.0, 806.0, 816.0, 825.0, 835.0, 845.0, 856.0, 866.0, 876.0,
    887.0, 898.0, 909.0, 920.0, 931.0, 942.0, 953.0, 965.0, 976.0, 988.0,
];

impl Granularity {
    fn parse(value: &Bson) -> Result<Granularity> {
        let Bson::String(name) = value else {
            return Err(Error::location(
                40261,
                format!(
                    "The $bucketAuto 'granularity' field must be a string, but found type: {}",
                    type_name(value)
                ),
            ));
        };
        let series = match name.as_str() {
            "R5" => R5,
            "R10" => R10,
            "R20" => R20,
            "R40" => R40,
            "R80" => R80,
            "1-2-5" => SERIES_1_2_5,
            "E6" => E6,
            "E12" => E12,
            "E24" => E24,
            "E48" => E48,
            "E96" => E96,
            "E192" => E192,
            "POWERSOF2" => return Ok(Granularity::PowersOf2),
            _ => {
                return Err(Error::location(
                    40257,
                    format!("Unknown rounding granularity '{name}'"),
                ))
            }
        };
        Ok(Granularity::Preferred(series))
    }

    /// The smallest value of the series strictly above `value` (0 stays 0).
    fn round_up(&self, value: &Bson) -> Result<Bson> {
        let x = check_roundable(value, 40262, 40263, 40268)?;
        if x == 0.0 {
            return Ok(value.clone());
        }
        Ok(match self {
            Granularity::Preferred(series) => {
                let (first, last) = (series[0], series[series.len() - 1]);
                let mut multiplier = 1.0;
                while x >= last * multiplier {
                    multiplier *= 10.0;
                }
                if !multiplier.is_finite() {
                    // Beyond every decade of the series (near f64::MAX).
                    return Ok(Bson::Double(f64::INFINITY));
                }
                while x < first * multiplier {
                    let previous_min = first * multiplier;
                    multiplier /= 10.0;
                    if x >= last * multiplier {
                        return Ok(Bson::Double(previous_min));
                    }
                }
                let next = series.iter().find(|s| x < *s * multiplier).unwrap_or(&last);
                Bson::Double(next * multiplier)
            }
            Granularity::PowersOf2 => power_of_two(value, x.log2().floor() + 1.0),
        })
    }

    /// The largest value of the series strictly below `value` (0 stays 0).
    fn round_down(&self, value: &Bson) -> Result<Bson> {
        let x = check_roundable(value, 40262, 40263, 40268)?;
        if x == 0.0 {
            return Ok(value.clone());
        }
        Ok(match self {
            Granularity::Preferred(series) => {
                let (first, last) = (series[0], series[series.len() - 1]);
                let mut multiplier = 1.0;
                while x <= first * multiplier {
                    multiplier /= 10.0;
                }
                if multiplier == 0.0 {
                    // Below every decade of the series (subnormal numbers).
                    return Ok(Bson::Double(0.0));
                }
                while x > last * multiplier {
                    let previous_max = last * multiplier;
                    multiplier *= 10.0;
                    if x <= first * multiplier {
                        return Ok(Bson::Double(previous_max));
                    }
                }
                let below = series
                    .iter()
                    .rev()
                    .find(|s| *s * multiplier < x)
                    .unwrap_or(&first);
                Bson::Double(below * multiplier)
            }
            Granularity::PowersOf2 => power_of_two(value, x.log2().ceil() - 1.0),
        })
    }
}

/// 2^exponent, an integer of the input's width for integer inputs and a double otherwise.
fn power_of_two(input: &Bson, exponent: f64) -> Bson {
    let value = exponent.exp2();
    match input {
        _ if exponent < 0.0 => Bson::Double(value),
        Bson::Int32(_) if value <= i32::MAX as f64 => Bson::Int32(value as i32),
        Bson::Int32(_) | Bson::Int64(_) if value <= i64::MAX as f64 => Bson::Int64(value as i64),
        _ => Bson::Double(value),
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc, Bson, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    fn values(values: &[i32]) -> Vec<Document> {
        values.iter().map(|v| doc! {"v": *v}).collect()
    }

    fn ids(out: &[Document]) -> Vec<(Bson, Bson, i32)> {
        out.iter()
            .map(|d| {
                let id = d.get_document("_id").unwrap();
                (
                    id.get("min").unwrap().clone(),
                    id.get("max").unwrap().clone(),
                    d.get_i32("count").unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn equal_sized_buckets_keep_equal_values_together() {
        let out = run(
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 3}},
            values(&[9, 1, 2, 2, 2, 3, 4, 8, 5]),
        )
        .unwrap();
        assert_eq!(
            ids(&out),
            vec![
                (bson!(1), bson!(3), 4),
                (bson!(3), bson!(8), 3),
                (bson!(8), bson!(9), 2),
            ]
        );
        let out = run(
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 5, "output": {"all": {"$push": "$v"}}}},
            values(&[3, 1, 2]),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": {"min": 1, "max": 2}, "all": [1]},
                doc! {"_id": {"min": 2, "max": 3}, "all": [2]},
                doc! {"_id": {"min": 3, "max": 3}, "all": [3]},
            ]
        );
    }

    #[test]
    fn granularity_rounds_boundaries() {
        let out = run(
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R5"}},
            values(&[1, 3, 12, 30]),
        )
        .unwrap();
        assert_eq!(
            ids(&out),
            // The series is scaled by repeated division, as MongoDB computes it.
            vec![
                (Bson::Double(63.0 * (1.0 / 10.0 / 10.0)), bson!(4.0), 2),
                (bson!(4.0), bson!(40.0), 2)
            ]
        );
        let out = run(
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "POWERSOF2"}},
            values(&[1, 3, 5, 12]),
        )
        .unwrap();
        assert_eq!(
            ids(&out),
            vec![(bson!(0.5), bson!(4), 2), (bson!(4), bson!(16), 2)]
        );
        let out = run(
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "1-2-5"}},
            values(&[0, 0, 7, 14]),
        )
        .unwrap();
        assert_eq!(
            ids(&out),
            vec![(bson!(0), bson!(5.0), 2), (bson!(5.0), bson!(20.0), 2)]
        );
    }

    #[test]
    fn bucket_auto_errors() {
        let code = |spec: Bson, input: Vec<Document>| {
            run(doc! {"$bucketAuto": spec}, input).unwrap_err().code.0
        };
        assert_eq!(code(bson!(1), vec![]), 40240);
        assert_eq!(code(bson!({"groupBy": "v", "buckets": 1}), vec![]), 40239);
        assert_eq!(
            code(bson!({"groupBy": "$v", "buckets": "1"}), vec![]),
            40241
        );
        assert_eq!(
            code(bson!({"groupBy": "$v", "buckets": 1.5}), vec![]),
            40242
        );
        assert_eq!(code(bson!({"groupBy": "$v", "buckets": 0}), vec![]), 40243);
        assert_eq!(
            code(bson!({"groupBy": "$v", "buckets": 1, "output": 1}), vec![]),
            40244
        );
        assert_eq!(
            code(bson!({"groupBy": "$v", "buckets": 1, "x": 1}), vec![]),
            40245
        );
        assert_eq!(code(bson!({"groupBy": "$v"}), vec![]), 40246);
        assert_eq!(
            code(
                bson!({"groupBy": "$v", "buckets": 1, "granularity": 1}),
                vec![]
            ),
            40261
        );
        assert_eq!(
            code(
                bson!({"groupBy": "$v", "buckets": 1, "granularity": "R7"}),
                vec![]
            ),
            40257
        );
        let granular = bson!({"groupBy": "$v", "buckets": 1, "granularity": "E6"});
        assert_eq!(code(granular.clone(), vec![doc! {"v": "a"}]), 40258);
        assert_eq!(code(granular, vec![doc! {"v": -1}]), 40260);
        // Extreme values round without looping forever.
        let extreme = run(
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R10"}},
            vec![doc! {"v": f64::MAX}, doc! {"v": 5e-324}],
        )
        .unwrap();
        assert_eq!(extreme.len(), 2);
    }
}
