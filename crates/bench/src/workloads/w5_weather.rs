//! W5, weather observations in the shape of NOAA's Integrated Surface Data (as in MongoDB's
//! `sample_weatherdata`): every station reports every 12 hours, indexed by `{ts: 1, st: 1}`
//! and, on the stations' positions, `{position: "2dsphere"}`.
//! Seven questions: one observation (point), one station over a year, the whole world at
//! one moment, a scan for a rare present-weather condition, the highest temperature
//! among readings whose quality code is trusted (missing readings are 999.9, quality 9),
//! the observations of the stations nearest a place at one moment (`$geoNear`), and how
//! many observations were made in a country-sized polygon.

use super::{rng, tenths, weighted, Dataset, Files, JsonDate, MongoOp, Query, Variant};
use super::{WorkloadId, DAY_MS, EPOCH_2020_MS};
use crate::answer::{Answer, Cell};
use basalt_error::Result;
use bson::{doc, DateTime};
use rand::RngExt;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

const STATIONS_MAX: u64 = 500;
const INTERVAL_MS: i64 = DAY_MS / 2;
const RARE_CONDITION: &str = "99";
/// One observation in this many has the rare condition.
const RARE_ONE_IN: u32 = 20_000;
const CONDITIONS: [(&str, u32); 10] = [
    ("01", 40),
    ("02", 20),
    ("03", 10),
    ("05", 5),
    ("10", 8),
    ("45", 4),
    ("61", 6),
    ("71", 3),
    ("80", 3),
    ("95", 1),
];
/// Quality codes of a reading that is there: 1 and 5 are trusted, 2 is suspect.
const QUALITIES: [(&str, u32); 3] = [("1", 90), ("5", 8), ("2", 2)];
const TRUSTED: [&str; 2] = ["1", "5"];
const MISSING_VALUE: f64 = 999.9;
const MISSING_QUALITY: &str = "9";
const POINT_VARIANTS: usize = 20;
const STATION_YEAR_VARIANTS: usize = 5;
const MOMENT_VARIANTS: usize = 5;
/// The place the nearest stations are asked for (Paris), and how many.
const NEAR_PLACE: (f64, f64) = (2.35, 48.85);
const NEAREST: usize = 10;
/// A country-sized polygon (about Argentina's area), counterclockwise; its edges are
/// great-circle arcs, as MongoDB reads them.
const COUNTRY: [(f64, f64); 4] = [
    (-70.0, -50.0),
    (-55.0, -50.0),
    (-55.0, -25.0),
    (-70.0, -25.0),
];
/// The year the station-year query asks for.
const YEAR_START_MS: i64 = EPOCH_2020_MS + 366 * DAY_MS;
const YEAR_END_MS: i64 = YEAR_START_MS + 365 * DAY_MS;

struct Station {
    id: String,
    lat: f64,
    lon: f64,
    elevation: i32,
    call_letters: String,
}

/// How many stations the size is spread over: 500 (as in issue 4's target) once the size
/// allows two years of readings each.
fn stations_for(size: u64) -> u64 {
    (size / 1460).clamp(1, STATIONS_MAX)
}

pub(crate) fn generate(dir: &Path, size: u64, seed: u64) -> Result<Dataset> {
    let mut rng = rng(seed, WorkloadId::W5, 0);
    let station_count = stations_for(size);
    let moments = size.div_ceil(station_count);
    let stations: Vec<Station> = (0..station_count)
        .map(|s| {
            let letters: String = (0..4)
                .map(|_| char::from(rng.random_range(b'A'..=b'Z')))
                .collect();
            Station {
                id: format!("{:06}-{:05}", 700_000 + s * 37, 10_000 + s * 53),
                lat: tenths(rng.random_range(-70.0..75.0)),
                lon: tenths(rng.random_range(-180.0..180.0)),
                elevation: rng.random_range(-10..3000),
                call_letters: letters,
            }
        })
        .collect();

    // The variants' parameters are drawn before the data, from their own stream.
    let mut picks = super::rng(seed, WorkloadId::W5, 1);
    let points: Vec<(u64, u64)> = (0..POINT_VARIANTS)
        .map(|_| {
            (
                picks.random_range(0..station_count),
                picks.random_range(0..moments),
            )
        })
        .collect();
    let year_stations: Vec<u64> = (0..STATION_YEAR_VARIANTS)
        .map(|_| picks.random_range(0..station_count))
        .collect();
    let world_moments: Vec<u64> = (0..MOMENT_VARIANTS)
        .map(|_| picks.random_range(0..moments))
        .collect();
    let mut point_rows: HashMap<(u64, u64), Vec<Cell>> = HashMap::new();
    let mut year_counts = vec![0u64; STATION_YEAR_VARIANTS];
    let mut moment_counts = vec![0u64; MOMENT_VARIANTS];
    let mut rare = 0u64;
    let mut trusted_max = f64::NEG_INFINITY;

    let mut files = Files::create(dir, "w5", true)?;
    let mut written = 0;
    'all: for t in 0..moments {
        let ts = EPOCH_2020_MS + t as i64 * INTERVAL_MS;
        let season =
            ((ts - EPOCH_2020_MS) as f64 / (365.25 * DAY_MS as f64) * std::f64::consts::TAU).cos();
        for (s, station) in stations.iter().enumerate() {
            if written == size {
                break 'all;
            }
            written += 1;
            let (air, air_quality) = if rng.random_range(0..50) == 0 {
                (MISSING_VALUE, MISSING_QUALITY)
            } else {
                let quality = *weighted(&mut rng, &QUALITIES);
                let value = if quality == "2" {
                    // Suspect readings are the outliers a quality filter is for.
                    tenths(rng.random_range(50.0..65.0))
                } else {
                    let climate =
                        27.0 - station.lat.abs() * 0.5 - f64::from(station.elevation) / 200.0;
                    tenths(
                        climate - season * station.lat.signum() * 8.0 + rng.random_range(-6.0..6.0),
                    )
                };
                (value, quality)
            };
            let dew = tenths(air.min(40.0) - rng.random_range(0.0..10.0));
            let pressure = tenths(rng.random_range(980.0..1040.0));
            let wind_angle: i32 = rng.random_range(0..36) * 10;
            let wind_rate = tenths(rng.random_range(0.0..25.0));
            let visibility: i32 = rng.random_range(1..50) * 1000;
            let ceiling: i32 = rng.random_range(1..100) * 300;
            let condition = if rng.random_range(0..RARE_ONE_IN) == 0 {
                RARE_CONDITION
            } else {
                *weighted(&mut rng, &CONDITIONS)
            };
            files.record(|out, dates| {
                write!(
                    out,
                    r#"{{"st":"{}","ts":{},"position":{{"type":"Point","coordinates":[{:?},{:?}]}},"elevation":{},"callLetters":"{}","qualityControlProcess":"V020","dataSource":"4","type":"FM-13","airTemperature":{{"value":{air:?},"quality":"{air_quality}"}},"dewPoint":{{"value":{dew:?},"quality":"1"}},"pressure":{{"value":{pressure:?},"quality":"1"}},"wind":{{"direction":{{"angle":{wind_angle},"quality":"1"}},"type":"N","speed":{{"rate":{wind_rate:?},"quality":"1"}}}},"visibility":{{"distance":{{"value":{visibility},"quality":"1"}},"variability":{{"value":"N","quality":"9"}}}},"skyCondition":{{"ceilingHeight":{{"value":{ceiling},"quality":"1","determination":"C"}},"cavok":"N"}},"sections":["AG1","MW1"],"presentWeatherObservation":{{"condition":"{condition}","quality":"1"}}}}"#,
                    station.id,
                    JsonDate(ts, dates),
                    station.lon,
                    station.lat,
                    station.elevation,
                    station.call_letters,
                )
            })?;
            let s = s as u64;
            if points.contains(&(s, t)) {
                point_rows.insert(
                    (s, t),
                    vec![
                        Cell::Str(station.id.clone()),
                        Cell::Int(ts),
                        Cell::Float(air),
                    ],
                );
            }
            for (count, station_index) in year_counts.iter_mut().zip(&year_stations) {
                if *station_index == s && (YEAR_START_MS..YEAR_END_MS).contains(&ts) {
                    *count += 1;
                }
            }
            for (count, moment) in moment_counts.iter_mut().zip(&world_moments) {
                if *moment == t {
                    *count += 1;
                }
            }
            if condition == RARE_CONDITION {
                rare += 1;
            }
            if TRUSTED.contains(&air_quality) {
                trusted_max = trusted_max.max(air);
            }
        }
    }
    let (import_file, peer_file, bytes, checksum) = files.finish()?;

    let station_id = |s: u64| stations[s as usize].id.clone();
    let moment = |t: u64| EPOCH_2020_MS + t as i64 * INTERVAL_MS;
    let date = |ms: i64| DateTime::from_millis(ms);
    let point_variants = points
        .iter()
        .map(|&(s, t)| Variant {
            mongo: MongoOp::Find {
                filter: doc! {"st": station_id(s), "ts": date(moment(t))},
                projection: Some(doc! {"_id": 0, "st": 1, "ts": 1, "airTemperature.value": 1}),
            },
            sql: Some(format!(
                "SELECT $(st), $(ts), $(airTemperature.value) FROM $table WHERE $(ts) = {} AND $(st) = '{}'",
                moment(t),
                station_id(s)
            )),
            // A point past the end of a size that is not a multiple of the stations.
            expected: Answer::Rows(point_rows.get(&(s, t)).cloned().into_iter().collect()),
        })
        .collect();
    let year_variants = year_stations
        .iter()
        .zip(&year_counts)
        .map(|(&s, &count)| Variant {
            mongo: MongoOp::Find {
                filter: doc! {"st": station_id(s), "ts": {"$gte": date(YEAR_START_MS), "$lt": date(YEAR_END_MS)}},
                projection: None,
            },
            sql: Some(format!(
                "SELECT $doc FROM $table WHERE $(ts) >= {YEAR_START_MS} AND $(ts) < {YEAR_END_MS} AND $(st) = '{}'",
                station_id(s)
            )),
            expected: Answer::Count(count),
        })
        .collect();
    let moment_variants = world_moments
        .iter()
        .zip(&moment_counts)
        .map(|(&t, &count)| Variant {
            mongo: MongoOp::Find {
                filter: doc! {"ts": date(moment(t))},
                projection: None,
            },
            sql: Some(format!(
                "SELECT $doc FROM $table WHERE $(ts) = {}",
                moment(t)
            )),
            expected: Answer::Count(count),
        })
        .collect();
    let trusted: Vec<String> = TRUSTED.iter().map(|q| format!("'{q}'")).collect();
    // The stations observed at the first world moment, nearest first (equal distances
    // in station order, the order they were written in).
    let observed = |s: u64, t: u64| t * station_count + s < size;
    let here = unit_vector(NEAR_PLACE);
    let mut by_distance: Vec<(f64, u64)> = (0..station_count)
        .filter(|&s| observed(s, world_moments[0]))
        .map(|s| {
            let station = &stations[s as usize];
            (angle(here, unit_vector((station.lon, station.lat))), s)
        })
        .collect();
    by_distance.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let nearest: Vec<Vec<Cell>> = by_distance
        .iter()
        .take(NEAREST)
        .map(|&(_, s)| vec![Cell::Str(station_id(s))])
        .collect();
    let in_country: u64 = (0..station_count)
        .filter(|&s| {
            let station = &stations[s as usize];
            in_convex_polygon(&COUNTRY, (station.lon, station.lat))
        })
        .map(|s| (0..moments).filter(|&t| observed(s, t)).count() as u64)
        .sum();
    Ok(Dataset {
        id: WorkloadId::W5,
        title: "weather",
        docs: size,
        import_file,
        peer_file,
        bytes,
        checksum,
        indexes: vec![doc! {"ts": 1, "st": 1}, doc! {"position": "2dsphere"}],
        peer_setup: vec!["CREATE INDEX $table_ts_st ON $table ($(ts), $(st))".to_string()],
        // Readings twice a day: buckets of "hours" granularity span 30 days (60 readings
        // of one station), where "seconds" would make a bucket of each reading.
        time_series: Some(doc! {"timeField": "ts", "metaField": "st", "granularity": "hours"}),
        queries: vec![
            Query {
                name: "point",
                scanned_docs: None,
                variants: point_variants,
            },
            Query {
                name: "station-year",
                scanned_docs: None,
                variants: year_variants,
            },
            Query {
                name: "world-at-moment",
                scanned_docs: None,
                variants: moment_variants,
            },
            Query {
                name: "rare condition",
                scanned_docs: Some(size),
                variants: vec![Variant {
                    mongo: MongoOp::Find {
                        filter: doc! {"presentWeatherObservation.condition": RARE_CONDITION},
                        projection: None,
                    },
                    sql: Some(format!(
                        "SELECT $doc FROM $table WHERE $(presentWeatherObservation.condition) = '{RARE_CONDITION}'"
                    )),
                    expected: Answer::Count(rare),
                }],
            },
            Query {
                name: "nearest at moment",
                scanned_docs: None,
                variants: vec![Variant {
                    mongo: MongoOp::Aggregate(vec![
                        doc! {"$geoNear": {
                            "near": {"type": "Point", "coordinates": [NEAR_PLACE.0, NEAR_PLACE.1]},
                            "key": "position",
                            "query": {"ts": date(moment(world_moments[0]))},
                        }},
                        doc! {"$limit": NEAREST as i64},
                        doc! {"$project": {"_id": 0, "st": 1}},
                    ]),
                    sql: None,
                    expected: Answer::Rows(nearest),
                }],
            },
            Query {
                name: "count in country",
                scanned_docs: None,
                variants: vec![Variant {
                    mongo: MongoOp::Count(doc! {"position": {"$geoWithin": {"$geometry": {
                        "type": "Polygon",
                        "coordinates": [COUNTRY.iter().chain(&COUNTRY[..1]).map(|(x, y)| vec![*x, *y]).collect::<Vec<_>>()],
                    }}}}),
                    sql: None,
                    expected: Answer::Rows(vec![vec![Cell::Int(in_country as i64)]]),
                }],
            },
            Query {
                name: "max trusted temp",
                scanned_docs: Some(size),
                variants: vec![Variant {
                    mongo: MongoOp::Aggregate(vec![
                        doc! {"$match": {"airTemperature.quality": {"$in": TRUSTED.to_vec()}}},
                        doc! {"$group": {"_id": null, "max": {"$max": "$airTemperature.value"}}},
                    ]),
                    sql: Some(format!(
                        "SELECT NULL, max($(airTemperature.value)) FROM $table WHERE $(airTemperature.quality) IN ({})",
                        trusted.join(", ")
                    )),
                    expected: Answer::Rows(vec![vec![Cell::Null, Cell::Float(trusted_max)]]),
                }],
            },
        ],
    })
}

/// A longitude/latitude in degrees as a point on the unit sphere.
fn unit_vector((lon, lat): (f64, f64)) -> [f64; 3] {
    let (lon, lat) = (lon.to_radians(), lat.to_radians());
    [lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// The great-circle angle between two points.
fn angle(a: [f64; 3], b: [f64; 3]) -> f64 {
    let c = cross(a, b);
    dot(c, c).sqrt().atan2(dot(a, b))
}

/// Whether a point is inside a convex spherical polygon given counterclockwise: on the
/// left of every great-circle edge.
fn in_convex_polygon(vertices: &[(f64, f64)], point: (f64, f64)) -> bool {
    let p = unit_vector(point);
    (0..vertices.len()).all(|i| {
        let a = unit_vector(vertices[i]);
        let b = unit_vector(vertices[(i + 1) % vertices.len()]);
        dot(cross(a, b), p) > 0.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{assert_deterministic, assert_importable};

    #[test]
    fn same_seed_same_observations() {
        assert_deterministic(|dir, seed| generate(dir, 3000, seed));
    }

    #[test]
    fn observations_have_the_isd_shape_and_answers_are_consistent() {
        let dir = tempfile::tempdir().expect("dir");
        let dataset = generate(dir.path(), 3000, 5).expect("generate");
        let docs = assert_importable(&dataset);
        assert_eq!(docs.len(), 3000);
        let first = &docs[0];
        assert!(first.get_datetime("ts").is_ok());
        assert!(first
            .get_document("airTemperature")
            .expect("air")
            .get_f64("value")
            .is_ok());
        assert!(first
            .get_document("presentWeatherObservation")
            .expect("pwo")
            .get_str("condition")
            .is_ok());
        // Each point variant names an observation that exists.
        for variant in &dataset.queries[0].variants {
            assert!(matches!(&variant.expected, Answer::Rows(rows) if rows.len() == 1));
        }
        let peer = std::fs::read_to_string(&dataset.peer_file).expect("peer file");
        assert!(
            peer.starts_with(r#"{"st":"700000-10000","ts":1577836800000,"#),
            "{}",
            &peer[..60]
        );
    }
}
