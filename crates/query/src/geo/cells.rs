//! The cells geo indexes key geometries by: a quadtree over a rectangle of coordinates
//! (longitude × latitude for `2dsphere`, the index's `[min, max)` square for `2d`),
//! each cell named by the digits `0`–`3` of the quadrants leading to it. A cell's name is
//! a prefix of its descendants' names, so the entries inside a cell are one range of
//! index keys, and the cells containing it are its name's prefixes.
//!
//! A stored geometry is keyed by the few cells covering its bounds (a point by one cell
//! at the finest level); a query reads, for each of the cells covering the region it
//! asks about, the range of that cell's descendants and the entries of its ancestors.
//! The matcher then checks each candidate exactly: cells only narrow the scan.

use super::sphere::{Ring, V3};
use super::Flat;

/// The finest level: cells about 5 mm across on the Earth.
pub const MAX_LEVEL: u32 = 26;

/// The most cells a query's region is covered by per side.
const QUERY_CELLS_PER_SIDE: f64 = 16.0;

/// A rectangle of coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub min: Flat,
    pub max: Flat,
}

impl Bounds {
    /// The whole longitude × latitude rectangle.
    pub const SPHERE: Bounds = Bounds {
        min: (-180.0, -90.0),
        max: (180.0, 90.0),
    };

    pub fn of_points(points: &[Flat]) -> Option<Bounds> {
        let first = *points.first()?;
        Some(points.iter().fold(
            Bounds {
                min: first,
                max: first,
            },
            |b, p| Bounds {
                min: (b.min.0.min(p.0), b.min.1.min(p.1)),
                max: (b.max.0.max(p.0), b.max.1.max(p.1)),
            },
        ))
    }

    pub fn of_flat(vertices: &[Flat]) -> Option<Bounds> {
        Bounds::of_points(vertices)
    }

    pub fn union(&self, o: &Bounds) -> Bounds {
        Bounds {
            min: (self.min.0.min(o.min.0), self.min.1.min(o.min.1)),
            max: (self.max.0.max(o.max.0), self.max.1.max(o.max.1)),
        }
    }

    /// The bounds of a spherical ring: its edges' (see [`Bounds::of_edges`]), none when
    /// it surrounds a pole.
    pub fn of_ring(ring: &Ring) -> Option<Bounds> {
        let pole = [V3(0.0, 0.0, 1.0), V3(0.0, 0.0, -1.0)]
            .iter()
            .any(|p| ring.contains(*p));
        if pole {
            return None;
        }
        Bounds::of_edges(ring.edges())
    }

    /// The bounds of a line of great-circle arcs.
    pub fn of_arcs(vertices: &[V3]) -> Option<Bounds> {
        Bounds::of_edges(vertices.windows(2).map(|w| (w[0], w[1])))
    }

    /// The bounds of great-circle edges, sampled (an edge bulges toward the pole beyond
    /// its ends); none when one crosses the antimeridian.
    fn of_edges(edges: impl Iterator<Item = (V3, V3)>) -> Option<Bounds> {
        let mut points = Vec::new();
        for (a, b) in edges {
            if (a.lng_lat().0 - b.lng_lat().0).abs() > 180.0 {
                return None;
            }
            // A sample every degree or so.
            let steps = (a.angle(b).to_degrees().ceil() as u32).clamp(8, 360);
            for step in 0..=steps {
                let t = f64::from(step) / f64::from(steps);
                let p = V3(
                    a.0 + (b.0 - a.0) * t,
                    a.1 + (b.1 - a.1) * t,
                    a.2 + (b.2 - a.2) * t,
                );
                points.push(p.normalized().lng_lat());
            }
        }
        // Margin for the bulge between samples.
        Some(Bounds::of_points(&points)?.grown(0.5))
    }

    /// The bounds of a spherical cap of `radius` radians.
    pub fn of_cap(center: V3, radius: f64) -> Option<Bounds> {
        let (lng, lat) = center.lng_lat();
        let r = radius.to_degrees();
        if r >= 90.0 || lat + r >= 90.0 || lat - r <= -90.0 {
            return None;
        }
        let d_lng = (radius.sin() / lat.to_radians().cos())
            .clamp(-1.0, 1.0)
            .asin()
            .to_degrees();
        if lng - d_lng < -180.0 || lng + d_lng > 180.0 {
            return None;
        }
        Some(
            Bounds {
                min: (lng - d_lng, lat - r),
                max: (lng + d_lng, lat + r),
            }
            .grown(1e-6),
        )
    }

    fn grown(&self, margin: f64) -> Bounds {
        Bounds {
            min: (self.min.0 - margin, self.min.1 - margin),
            max: (self.max.0 + margin, self.max.1 + margin),
        }
    }
}

/// The quadtree of an index: the rectangle its cells divide.
#[derive(Clone, Copy, Debug)]
pub struct Grid {
    pub domain: Bounds,
}

impl Grid {
    /// The cell numbers (x, y) at `level` of a point, clamped into the domain.
    fn cell_xy(&self, p: Flat, level: u32) -> (u64, u64) {
        let n = (1u64 << level) as f64;
        let scale = |v: f64, lo: f64, hi: f64| {
            let t = ((v - lo) / (hi - lo) * n).floor();
            t.clamp(0.0, n - 1.0) as u64
        };
        (
            scale(p.0, self.domain.min.0, self.domain.max.0),
            scale(p.1, self.domain.min.1, self.domain.max.1),
        )
    }

    fn name(x: u64, y: u64, level: u32) -> String {
        (0..level)
            .rev()
            .map(|bit| {
                let digit = ((x >> bit) & 1) | (((y >> bit) & 1) << 1);
                char::from(b'0' + digit as u8)
            })
            .collect()
    }

    /// The level at which `bounds` spans at most `per_side` cells each way.
    fn level_for(&self, bounds: &Bounds, per_side: f64) -> u32 {
        let width = (self.domain.max.0 - self.domain.min.0).max(f64::MIN_POSITIVE);
        let height = (self.domain.max.1 - self.domain.min.1).max(f64::MIN_POSITIVE);
        let span =
            ((bounds.max.0 - bounds.min.0) / width).max((bounds.max.1 - bounds.min.1) / height);
        if span <= 0.0 {
            return MAX_LEVEL;
        }
        let level = (per_side / span).log2().floor();
        level.clamp(0.0, f64::from(MAX_LEVEL)) as u32
    }

    /// The cells covering `bounds` at one level.
    fn cover(&self, bounds: &Bounds, level: u32) -> Vec<String> {
        let (x0, y0) = self.cell_xy(bounds.min, level);
        let (x1, y1) = self.cell_xy(bounds.max, level);
        let mut cells = Vec::new();
        for x in x0..=x1 {
            for y in y0..=y1 {
                cells.push(Grid::name(x, y, level));
            }
        }
        cells
    }

    /// The index keys of a stored geometry with these points: at most four cells.
    pub fn keys(&self, points: &[Flat]) -> Vec<String> {
        let Some(bounds) = Bounds::of_points(points) else {
            return Vec::new();
        };
        let level = self.level_for(&bounds, 1.0);
        self.cover(&bounds, level)
    }

    /// What a query for `bounds` reads: ranges `[start, end)` of cell names holding
    /// the cells covering it and their descendants (neighbours in the quadtree's order
    /// joined; `end` `None` for the last name there is), and the names of their
    /// ancestors, whose entries it reads one by one.
    pub fn query(&self, bounds: &Bounds) -> (Vec<(String, Option<String>)>, Vec<String>) {
        let level = self.level_for(bounds, QUERY_CELLS_PER_SIDE);
        let mut cells = self.cover(bounds, level);
        cells.sort();
        let mut ancestors: Vec<String> = cells
            .iter()
            .flat_map(|cell| (0..cell.len()).map(move |n| cell[..n].to_string()))
            .collect();
        ancestors.sort();
        ancestors.dedup();
        let mut ranges: Vec<(String, Option<String>)> = Vec::new();
        for cell in cells {
            let end = next_cell(&cell);
            match ranges.last_mut() {
                Some((_, last_end)) if last_end.as_deref() == Some(cell.as_str()) => {
                    *last_end = end;
                }
                _ => ranges.push((cell, end)),
            }
        }
        (ranges, ancestors)
    }
}

/// The name that follows a cell and its descendants in the quadtree's order: its last
/// digit counted up, carrying into its parent's; `None` after the last cell.
fn next_cell(cell: &str) -> Option<String> {
    let mut digits = cell.as_bytes().to_vec();
    while let Some(last) = digits.pop() {
        if last < b'3' {
            digits.push(last + 1);
            return Some(String::from_utf8(digits).expect("digits are ASCII"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_found_through_the_cells_of_a_region_around_it() {
        let grid = Grid {
            domain: Bounds::SPHERE,
        };
        let key = &grid.keys(&[(2.35, 48.85)])[0];
        assert_eq!(key.len(), MAX_LEVEL as usize);
        let inside = |ranges: &[(String, Option<String>)]| {
            ranges.iter().any(|(start, end)| {
                key.as_str() >= start.as_str() && end.as_ref().is_none_or(|e| key < e)
            })
        };
        let (ranges, _) = grid.query(&Bounds {
            min: (2.0, 48.0),
            max: (3.0, 49.0),
        });
        assert!(inside(&ranges));
        let (elsewhere, _) = grid.query(&Bounds {
            min: (20.0, 10.0),
            max: (21.0, 11.0),
        });
        assert!(!inside(&elsewhere));
    }

    #[test]
    fn a_large_shape_is_found_through_an_ancestor() {
        let grid = Grid {
            domain: Bounds::SPHERE,
        };
        let keys = grid.keys(&[(-50.0, -40.0), (60.0, 50.0)]);
        let (ranges, ancestors) = grid.query(&Bounds {
            min: (1.0, 1.0),
            max: (1.5, 1.5),
        });
        assert!(keys.iter().any(|k| ancestors.contains(k)
            || ranges
                .iter()
                .any(|(start, end)| k >= start && end.as_ref().is_none_or(|e| k < e))));
    }

    #[test]
    fn neighbouring_cells_make_one_range() {
        assert_eq!(next_cell("0123").as_deref(), Some("013"));
        assert_eq!(next_cell("0120").as_deref(), Some("0121"));
        assert_eq!(next_cell("333"), None);
    }
}
