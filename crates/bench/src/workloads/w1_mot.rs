//! W1, MOT banding: UK vehicle test records (the shape of the DVSA's open MOT data), and
//! the ad-hoc question a field report timed on MongoDB — tests and miles per engine-size
//! band, diesel engines counting 1.5 times their size — with no index to help.

use super::{rng, weighted, Dataset, Files, JsonDate, MongoOp, Query, Variant, WorkloadId};
use super::{DAY_MS, EPOCH_2020_MS};
use crate::answer::{Answer, Cell};
use basalt_error::Result;
use bson::{doc, Bson, Document};
use rand::RngExt;
use std::io::Write;
use std::path::Path;

const MAKES: [(&str, &[&str]); 16] = [
    ("FORD", &["FIESTA", "FOCUS", "MONDEO", "KUGA"]),
    ("VAUXHALL", &["CORSA", "ASTRA", "INSIGNIA"]),
    ("VOLKSWAGEN", &["GOLF", "POLO", "PASSAT"]),
    ("BMW", &["1 SERIES", "3 SERIES", "X5"]),
    ("TOYOTA", &["YARIS", "AURIS", "PRIUS"]),
    ("NISSAN", &["MICRA", "QASHQAI", "JUKE"]),
    ("PEUGEOT", &["207", "308", "3008"]),
    ("RENAULT", &["CLIO", "MEGANE"]),
    ("AUDI", &["A3", "A4", "Q5"]),
    ("MERCEDES-BENZ", &["C CLASS", "E CLASS"]),
    ("HONDA", &["CIVIC", "JAZZ"]),
    ("CITROEN", &["C3", "C4"]),
    ("KIA", &["RIO", "SPORTAGE"]),
    ("HYUNDAI", &["I10", "I30", "TUCSON"]),
    ("SKODA", &["FABIA", "OCTAVIA"]),
    ("MINI", &["COOPER"]),
];
const COLOURS: [&str; 12] = [
    "SILVER", "BLACK", "BLUE", "WHITE", "GREY", "RED", "GREEN", "YELLOW", "ORANGE", "PURPLE",
    "BROWN", "BEIGE",
];
const FUELS: [(&str, u32); 5] = [("PE", 52), ("DI", 43), ("HY", 3), ("EL", 1), ("LP", 1)];
const ENGINES_CC: [i32; 16] = [
    998, 1124, 1199, 1242, 1368, 1398, 1461, 1497, 1598, 1796, 1968, 1995, 2179, 2487, 2993, 3996,
];
const RESULTS: [(&str, u32); 4] = [("P", 70), ("F", 25), ("PRS", 4), ("ABA", 1)];
const POSTCODE_AREAS: [&str; 24] = [
    "AB", "B", "BS", "CB", "CF", "DE", "E", "EH", "G", "GL", "L", "LS", "M", "N", "NE", "NG", "OX",
    "PL", "S", "SE", "SW", "TN", "W", "YO",
];
/// Upper bounds (cc, exclusive) and labels of the bands; labels sort in band order.
const BANDS: [(f64, &str); 6] = [
    (1000.0, "0-999"),
    (1400.0, "1000-1399"),
    (1800.0, "1400-1799"),
    (2200.0, "1800-2199"),
    (3000.0, "2200-2999"),
    (f64::INFINITY, "3000+"),
];
const DIESEL_FACTOR: f64 = 1.5;

pub(crate) fn generate(dir: &Path, size: u64, seed: u64) -> Result<Dataset> {
    let mut rng = rng(seed, WorkloadId::W1, 0);
    let mut files = Files::create(dir, "w1", true)?;
    // Per band: tests and miles, the expected answer.
    let mut totals = [(0i64, 0i64); BANDS.len()];
    for i in 0..size {
        let (make, models) = MAKES[rng.random_range(0..MAKES.len())];
        let model = models[rng.random_range(0..models.len())];
        let fuel = *weighted(&mut rng, &FUELS);
        let cc = if fuel == "EL" {
            0
        } else {
            ENGINES_CC[rng.random_range(0..ENGINES_CC.len())]
        };
        let first_use = EPOCH_2020_MS - rng.random_range(3..20) * 365 * DAY_MS;
        let test_date = EPOCH_2020_MS + rng.random_range(0..730) * DAY_MS;
        let mileage: i32 = rng.random_range(500..200_000);
        let result = *weighted(&mut rng, &RESULTS);
        let colour = COLOURS[rng.random_range(0..COLOURS.len())];
        let area = POSTCODE_AREAS[rng.random_range(0..POSTCODE_AREAS.len())];
        let vehicle_id: i64 = rng.random_range(1..2_000_000_000);
        files.record(|out, dates| {
            write!(
                out,
                r#"{{"_id":{},"vehicle_id":{vehicle_id},"test_date":{},"test_class_id":4,"test_type":"NT","test_result":"{result}","test_mileage":{mileage},"postcode_area":"{area}","make":"{make}","model":"{model}","colour":"{colour}","fuel_type":"{fuel}","cylinder_capacity":{cc},"first_use_date":{}}}"#,
                1_000_000_000 + i,
                JsonDate(test_date, dates),
                JsonDate(first_use, dates),
            )
        })?;
        let effective = f64::from(cc) * if fuel == "DI" { DIESEL_FACTOR } else { 1.0 };
        let band = BANDS
            .iter()
            .position(|(upper, _)| effective < *upper)
            .unwrap_or(0);
        totals[band].0 += 1;
        totals[band].1 += i64::from(mileage);
    }
    let expected = Answer::Rows(
        BANDS
            .iter()
            .zip(totals)
            .filter(|(_, (tests, _))| *tests > 0)
            .map(|((_, label), (tests, miles))| {
                vec![
                    Cell::Str(label.to_string()),
                    Cell::Int(tests),
                    Cell::Int(miles),
                ]
            })
            .collect(),
    );
    let (import_file, peer_file, bytes, checksum) = files.finish()?;
    Ok(Dataset {
        id: WorkloadId::W1,
        title: "MOT banding",
        docs: size,
        import_file,
        peer_file,
        bytes,
        checksum,
        indexes: Vec::new(),
        peer_setup: Vec::new(),
        time_series: None,
        queries: vec![Query {
            name: "banding",
            scanned_docs: Some(size),
            variants: vec![Variant {
                mongo: MongoOp::Aggregate(pipeline()),
                sql: Some(sql()),
                expected,
            }],
        }],
    })
}

/// `$project` with the diesel factor, `$project` with nested `$cond` bands, `$group`,
/// `$sort`.
fn pipeline() -> Vec<Document> {
    let mut band = Bson::String(BANDS[BANDS.len() - 1].1.to_string());
    for (upper, label) in BANDS[..BANDS.len() - 1].iter().rev() {
        band = Bson::Document(doc! {"$cond": [{"$lt": ["$effective", upper]}, label, band]});
    }
    vec![
        doc! {"$project": {
            "_id": 0,
            "effective": {"$multiply": [
                "$cylinder_capacity",
                {"$cond": [{"$eq": ["$fuel_type", "DI"]}, DIESEL_FACTOR, 1]},
            ]},
            "miles": "$test_mileage",
        }},
        doc! {"$project": {"band": band, "miles": 1}},
        doc! {"$group": {"_id": "$band", "tests": {"$sum": 1}, "miles": {"$sum": "$miles"}}},
        doc! {"$sort": {"_id": 1}},
    ]
}

fn sql() -> String {
    let cases: Vec<String> = BANDS[..BANDS.len() - 1]
        .iter()
        .map(|(upper, label)| format!("WHEN effective < {upper} THEN '{label}'"))
        .collect();
    format!(
        "SELECT CASE {} ELSE '{}' END AS band, count(*) AS tests, sum(miles) AS miles \
         FROM (SELECT $(cylinder_capacity) * CASE WHEN $(fuel_type) = 'DI' THEN {DIESEL_FACTOR} ELSE 1 END AS effective, \
         $(test_mileage) AS miles FROM $table) AS t GROUP BY band ORDER BY band",
        cases.join(" "),
        BANDS[BANDS.len() - 1].1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{assert_deterministic, assert_importable};

    #[test]
    fn same_seed_same_records() {
        assert_deterministic(|dir, seed| generate(dir, 500, seed));
    }

    #[test]
    fn records_have_the_mot_shape_and_the_answer_adds_up() {
        let dir = tempfile::tempdir().expect("dir");
        let dataset = generate(dir.path(), 300, 1).expect("generate");
        let docs = assert_importable(&dataset);
        assert_eq!(docs.len(), 300);
        assert!(docs[0].get_datetime("test_date").is_ok());
        assert!(docs[0].get_i32("cylinder_capacity").is_ok());
        let Answer::Rows(rows) = &dataset.queries[0].variants[0].expected else {
            panic!("rows expected");
        };
        let tests: i64 = rows
            .iter()
            .map(|r| match r[1] {
                Cell::Int(n) => n,
                _ => 0,
            })
            .sum();
        assert_eq!(tests, 300);
    }
}
