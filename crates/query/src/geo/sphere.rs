//! Geometry on the unit sphere, as MongoDB's `2dsphere` queries see the Earth: points
//! are unit vectors, edges are great-circle arcs (the shortest path between their ends,
//! not a straight line on a map), and a polygon's ring bounds the smaller of the two
//! regions it splits the sphere into — or, under MongoDB's "strict winding" CRS, the
//! region on its left.
//!
//! Predicates are exact up to floating point, with a small tolerance for "on the
//! boundary"; containment is decided by counting the edges crossed on the way to a
//! point just left of the ring's first edge, and which side is the region by the area
//! on the ring's left (a ring's signed area).

/// The Earth's radius MongoDB converts radians to meters with.
pub const EARTH_RADIUS_METERS: f64 = 6_378_100.0;

/// How close (in radians, about 6 mm on the Earth) a point must be to an edge to be on it.
const ON_EDGE_RADIANS: f64 = 1e-9;

/// A point on the unit sphere.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct V3(pub f64, pub f64, pub f64);

impl V3 {
    /// The point at a longitude and latitude in degrees.
    pub fn from_lng_lat(lng: f64, lat: f64) -> V3 {
        let (lng, lat) = (lng.to_radians(), lat.to_radians());
        V3(lat.cos() * lng.cos(), lat.cos() * lng.sin(), lat.sin())
    }

    /// Longitude and latitude in degrees.
    pub fn lng_lat(self) -> (f64, f64) {
        let lat = self.2.clamp(-1.0, 1.0).asin().to_degrees();
        let lng = self.1.atan2(self.0).to_degrees();
        (lng, lat)
    }

    pub fn dot(self, o: V3) -> f64 {
        self.0 * o.0 + self.1 * o.1 + self.2 * o.2
    }

    pub fn cross(self, o: V3) -> V3 {
        V3(
            self.1 * o.2 - self.2 * o.1,
            self.2 * o.0 - self.0 * o.2,
            self.0 * o.1 - self.1 * o.0,
        )
    }

    fn add(self, o: V3) -> V3 {
        V3(self.0 + o.0, self.1 + o.1, self.2 + o.2)
    }

    fn scale(self, k: f64) -> V3 {
        V3(self.0 * k, self.1 * k, self.2 * k)
    }

    fn norm(self) -> f64 {
        self.dot(self).sqrt()
    }

    pub fn normalized(self) -> V3 {
        let n = self.norm();
        if n == 0.0 {
            self
        } else {
            self.scale(1.0 / n)
        }
    }

    /// The angle between two points: their distance on the unit sphere, in radians.
    pub fn angle(self, o: V3) -> f64 {
        self.cross(o).norm().atan2(self.dot(o))
    }
}

/// The angle between two points computed from their chord, as MongoDB measures legacy
/// points on the sphere (its last bits differ from [`V3::angle`]'s).
pub fn chord_angle(a: V3, b: V3) -> f64 {
    let d = V3(a.0 - b.0, a.1 - b.1, a.2 - b.2);
    2.0 * (d.norm() / 2.0).min(1.0).asin()
}

/// Below this a triple product is taken for zero: the point is on the great circle (a
/// shared vertex computed twice differs in its last bits).
const COLLINEAR: f64 = 1e-15;

/// Whether arcs `ab` and `cd` cross at a point interior to both.
pub fn arcs_cross(a: V3, b: V3, c: V3, d: V3) -> bool {
    let ab = a.cross(b);
    let acb = -ab.dot(c);
    let bda = ab.dot(d);
    if acb.abs() < COLLINEAR || bda.abs() < COLLINEAR || acb * bda <= 0.0 {
        return false;
    }
    let cd = c.cross(d);
    let cbd = -cd.dot(b);
    let dac = cd.dot(a);
    if cbd.abs() < COLLINEAR || dac.abs() < COLLINEAR {
        return false;
    }
    acb * cbd > 0.0 && acb * dac > 0.0
}

/// The distance in radians from `p` to the arc `ab`.
pub fn distance_to_arc(p: V3, a: V3, b: V3) -> f64 {
    let n = a.cross(b);
    if n.norm() < 1e-15 {
        return p.angle(a);
    }
    let n = n.normalized();
    // The point of the great circle nearest `p`, and whether it lies between a and b.
    let projected = p.add(n.scale(-p.dot(n)));
    if projected.norm() > 1e-15 {
        let q = projected.normalized();
        if a.cross(q).dot(n) >= 0.0 && q.cross(b).dot(n) >= 0.0 {
            return p.angle(q);
        }
    }
    p.angle(a).min(p.angle(b))
}

/// Whether two arcs touch: they cross, or an end of one lies on the other.
pub fn arcs_touch(a: V3, b: V3, c: V3, d: V3) -> bool {
    arcs_cross(a, b, c, d)
        || distance_to_arc(a, c, d) <= ON_EDGE_RADIANS
        || distance_to_arc(b, c, d) <= ON_EDGE_RADIANS
        || distance_to_arc(c, a, b) <= ON_EDGE_RADIANS
        || distance_to_arc(d, a, b) <= ON_EDGE_RADIANS
}

/// A closed ring of vertices (the closing one not repeated) and the region it bounds.
#[derive(Clone, Debug)]
pub struct Ring {
    pub vertices: Vec<V3>,
    /// A point just left of the first edge: inside the region on the ring's left.
    left_of_first_edge: V3,
    /// Whether the region is the one on the ring's right.
    right_side: bool,
}

impl Ring {
    /// The ring bounding the smaller of its two regions, as MongoDB reads a polygon
    /// (`strict_winding`: the region on its left, however large).
    pub fn new(vertices: Vec<V3>, strict_winding: bool) -> Ring {
        let (a, b) = (vertices[0], vertices[1 % vertices.len()]);
        let left_of_first_edge = a
            .add(b)
            .normalized()
            .add(a.cross(b).normalized().scale(1e-9))
            .normalized();
        // The area on the left: the signed areas of a fan of triangles from the
        // first vertex, positive for a counterclockwise ring.
        let signed: f64 = (1..vertices.len().saturating_sub(1))
            .map(|i| triangle_signed_area(a, vertices[i], vertices[i + 1]))
            .sum();
        let left_area = if signed >= 0.0 {
            signed
        } else {
            4.0 * std::f64::consts::PI + signed
        };
        Ring {
            vertices,
            left_of_first_edge,
            right_side: !strict_winding && left_area > 2.0 * std::f64::consts::PI,
        }
    }

    pub fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        let n = self.vertices.len();
        (0..n).map(move |i| (self.vertices[i], self.vertices[(i + 1) % n]))
    }

    /// Whether `p` lies on one of the ring's edges.
    pub fn on_boundary(&self, p: V3) -> bool {
        self.edges()
            .any(|(a, b)| distance_to_arc(p, a, b) <= ON_EDGE_RADIANS)
    }

    /// Whether `p` lies inside the region (its boundary excluded): an even number of
    /// edges crossed on the way from `p` to a point on the left means `p` is on the
    /// left. A way longer than about 150° goes through a point a quarter turn from both
    /// ends, so that no arc is near half a great circle.
    pub fn contains(&self, p: V3) -> bool {
        let target = self.left_of_first_edge;
        let crossed = |from: V3, to: V3| {
            self.edges()
                .filter(|(a, b)| arcs_cross(from, to, *a, *b))
                .count()
        };
        let crossings = if p.add(target).norm() > 0.5 {
            crossed(p, target)
        } else {
            let mut turn = p.cross(target);
            if turn.norm() < 1e-12 {
                turn = p.cross(V3(0.267, 0.534, 0.802));
            }
            let via = turn.normalized();
            crossed(p, via) + crossed(via, target)
        };
        (crossings % 2 == 0) != self.right_side
    }

    /// The distance in radians from `p` to the ring's edges.
    pub fn distance_to_edges(&self, p: V3) -> f64 {
        self.edges()
            .map(|(a, b)| distance_to_arc(p, a, b))
            .fold(f64::INFINITY, f64::min)
    }

    /// Whether two edges of the ring cross (or touch away from their shared vertex).
    pub fn self_intersects(&self) -> bool {
        let edges: Vec<(V3, V3)> = self.edges().collect();
        let n = edges.len();
        for i in 0..n {
            for j in i + 1..n {
                // Adjacent edges meet at their shared vertex (a ring folding back on
                // itself bounds no area, which MongoDB accepts).
                let adjacent = j == i + 1 || (i == 0 && j == n - 1);
                let (a, b) = edges[i];
                let (c, d) = edges[j];
                if !adjacent && arcs_touch(a, b, c, d) {
                    return true;
                }
            }
        }
        false
    }
}

/// The signed area of the spherical triangle `abc`: positive when it turns
/// counterclockwise (seen from outside the sphere).
fn triangle_signed_area(a: V3, b: V3, c: V3) -> f64 {
    2.0 * a
        .dot(b.cross(c))
        .atan2(1.0 + a.dot(b) + b.dot(c) + c.dot(a))
}

/// A polygon: its shell and holes.
#[derive(Clone, Debug)]
pub struct SpherePolygon {
    pub shell: Ring,
    pub holes: Vec<Ring>,
}

impl SpherePolygon {
    /// Whether `p` is inside or on the boundary.
    pub fn covers(&self, p: V3) -> bool {
        if self.on_boundary(p) {
            return true;
        }
        self.shell.contains(p) && !self.holes.iter().any(|h| h.contains(p))
    }

    pub fn on_boundary(&self, p: V3) -> bool {
        self.shell.on_boundary(p) || self.holes.iter().any(|h| h.on_boundary(p))
    }

    /// A point inside, off the boundary, if the shell's centroid is one.
    pub fn interior_point(&self) -> Option<V3> {
        let sum = self
            .shell
            .vertices
            .iter()
            .fold(V3(0.0, 0.0, 0.0), |s, v| s.add(*v));
        let centroid = sum.normalized();
        (sum.norm() > 1e-12 && self.strictly_contains(centroid)).then_some(centroid)
    }

    /// Whether `p` is inside, off the boundary.
    pub fn strictly_contains(&self, p: V3) -> bool {
        !self.on_boundary(p) && self.covers(p)
    }

    pub fn rings(&self) -> impl Iterator<Item = &Ring> {
        std::iter::once(&self.shell).chain(&self.holes)
    }

    pub fn edges(&self) -> impl Iterator<Item = (V3, V3)> + '_ {
        self.rings().flat_map(Ring::edges)
    }

    /// Whether an edge of the polygon crosses the arc `ab` at interior points of both.
    pub fn crosses_arc(&self, a: V3, b: V3) -> bool {
        self.edges().any(|(c, d)| arcs_cross(a, b, c, d))
    }

    /// Whether an edge of the polygon touches the arc `ab`.
    pub fn touches_arc(&self, a: V3, b: V3) -> bool {
        self.edges().any(|(c, d)| arcs_touch(a, b, c, d))
    }

    /// The distance in radians from `p`: zero inside.
    pub fn distance(&self, p: V3) -> f64 {
        if self.covers(p) {
            0.0
        } else {
            self.rings()
                .map(|r| r.distance_to_edges(p))
                .fold(f64::INFINITY, f64::min)
        }
    }
}

/// A point's position on a plane, for the legacy (`2d`) shapes.
pub type Flat = (f64, f64);

/// Whether `p` is inside a planar polygon by MongoDB's legacy test (kept for its exact
/// answers on boundaries): a vertex or a point of a horizontal edge is inside, a point
/// of a vertical edge too, and otherwise a ray to the left counts edge crossings, with
/// points on a slanted edge counted as on its right.
pub fn flat_polygon_covers(vertices: &[Flat], p: Flat) -> bool {
    let n = vertices.len();
    let mut crossings = 0;
    for i in 0..n {
        let (p1, p2) = (vertices[i], vertices[(i + 1) % n]);
        if p == p1 || p == p2 {
            return true;
        }
        if p1.1 == p2.1 && p1.1 == p.1 && p.0 >= p1.0.min(p2.0) && p.0 <= p1.0.max(p2.0) {
            return true;
        }
        if p.1 > p1.1.min(p2.1) && p.1 <= p1.1.max(p2.1) && p.0 <= p1.0.max(p2.0) && p1.1 != p2.1 {
            let vertical = p1.0 == p2.0;
            if vertical && p.0 == p1.0 {
                return true;
            }
            if vertical || p.0 <= (p.1 - p1.1) * (p2.0 - p1.0) / (p2.1 - p1.1) + p1.0 {
                crossings += 1;
            }
        }
    }
    crossings % 2 == 1
}

pub fn flat_distance(a: Flat, b: Flat) -> f64 {
    (a.0 - b.0).hypot(a.1 - b.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(points: &[(f64, f64)]) -> Ring {
        Ring::new(
            points
                .iter()
                .map(|(x, y)| V3::from_lng_lat(*x, *y))
                .collect(),
            false,
        )
    }

    #[test]
    fn containment_follows_the_smaller_region_and_boundaries() {
        let square = ring(&[(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)]);
        assert!(square.contains(V3::from_lng_lat(5.0, 5.0)));
        assert!(!square.contains(V3::from_lng_lat(15.0, 5.0)));
        assert!(!square.contains(V3::from_lng_lat(-175.0, -5.0)));
        assert!(square.on_boundary(V3::from_lng_lat(0.0, 5.0)));
        assert!(square.on_boundary(V3::from_lng_lat(10.0, 10.0)));
        // The same ring clockwise bounds the same region.
        let clockwise = ring(&[(0.0, 0.0), (0.0, 10.0), (10.0, 10.0), (10.0, 0.0)]);
        assert!(clockwise.contains(V3::from_lng_lat(5.0, 5.0)));
    }

    #[test]
    fn great_circle_edges_bulge_toward_the_pole() {
        // The top edge at latitude 60 between longitudes -80 and 80 passes north of
        // (0, 61): that point is inside the spherical polygon, not the map's rectangle.
        let wide = ring(&[(-80.0, 0.0), (80.0, 0.0), (80.0, 60.0), (-80.0, 60.0)]);
        assert!(wide.contains(V3::from_lng_lat(0.0, 61.0)));
    }

    #[test]
    fn bowties_intersect_themselves() {
        assert!(ring(&[(0.0, 0.0), (2.0, 2.0), (2.0, 0.0), (0.0, 2.0)]).self_intersects());
        assert!(!ring(&[(0.0, 0.0), (2.0, 0.0), (2.0, 2.0), (0.0, 2.0)]).self_intersects());
    }

    #[test]
    fn distances_are_angles() {
        let a = V3::from_lng_lat(0.0, 0.0);
        let b = V3::from_lng_lat(90.0, 0.0);
        assert!((a.angle(b) - std::f64::consts::FRAC_PI_2).abs() < 1e-12);
        let p = V3::from_lng_lat(45.0, 10.0);
        assert!((distance_to_arc(p, a, b) - 10f64.to_radians()).abs() < 1e-9);
    }

    #[test]
    fn flat_polygons_follow_mongodbs_boundary_rules() {
        let triangle = [(0.0, 0.0), (4.0, 0.0), (0.0, 4.0)];
        assert!(flat_polygon_covers(&triangle, (1.0, 1.0)));
        assert!(flat_polygon_covers(&triangle, (2.0, 0.0)));
        assert!(flat_polygon_covers(&triangle, (0.0, 2.0)));
        assert!(!flat_polygon_covers(&triangle, (3.0, 3.0)));
        // MongoDB's legacy test: a point on a hypotenuse rising to the right is out.
        let right = [(0.0, 0.0), (10.0, 10.0), (10.0, 0.0)];
        assert!(!flat_polygon_covers(&right, (5.0, 5.0)));
    }
}
