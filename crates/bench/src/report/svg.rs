//! The plot of a run as one SVG, written by hand (a plotting library would cost more
//! build time than these few bar charts): load rates, best query times beside the peers'
//! (log scale), W4's latency percentiles and the connection storm's times.

use super::{rate, Report};
use crate::measure::millis;
use std::fmt::Write;

const WIDTH: f64 = 960.0;
const LABEL_WIDTH: f64 = 230.0;
const BAR_AREA: f64 = 600.0;
const BAR_HEIGHT: f64 = 13.0;
const GROUP_GAP: f64 = 10.0;
const COLORS: [&str; 4] = ["#c2410c", "#2563eb", "#16a34a", "#7c3aed"];

/// One bar chart: groups of bars, one bar per series.
struct Panel {
    title: String,
    log: bool,
    series: Vec<String>,
    groups: Vec<(String, Vec<Option<f64>>)>,
}

pub(crate) fn to_svg(report: &Report) -> String {
    let mut engines = vec!["Basalt".to_string()];
    engines.extend(report.peers.runs.iter().map(|r| r.engine.clone()));
    let mut panels = vec![
        Panel {
            title: "Load, documents per second (more is better)".into(),
            log: false,
            series: engines.clone(),
            groups: report
                .datasets
                .iter()
                .map(|d| {
                    let mut bars = vec![Some(rate(d.docs, d.load))];
                    bars.extend(report.peers.runs.iter().map(|r| {
                        r.loads
                            .get(d.id.name())
                            .map(|(load, _)| rate(d.docs, *load))
                    }));
                    (format!("{} {}", d.id.name(), d.title), bars)
                })
                .collect(),
        },
        Panel {
            title: "Best query time, ms (log scale, less is better)".into(),
            log: true,
            series: engines,
            groups: report
                .datasets
                .iter()
                .flat_map(|d| d.queries.iter().map(move |q| (d, q)))
                .map(|(d, q)| {
                    let mut bars = vec![q.basalt.best().map(millis)];
                    bars.extend(report.peers.runs.iter().map(|r| {
                        report
                            .peer_outcome(&r.engine, d.id, q.name)
                            .and_then(|o| o.best())
                            .map(millis)
                    }));
                    (q.label(d.id), bars)
                })
                .collect(),
        },
    ];
    if let Some(kv) = &report.kv {
        panels.push(Panel {
            title: format!(
                "W4 latency at {} client threads, ms (log scale)",
                crate::workloads::w4_kv::THREADS
            ),
            log: true,
            series: vec!["put".into(), "get by _id".into()],
            groups: [
                ("p50", 50.0),
                ("p90", 90.0),
                ("p99", 99.0),
                ("p99.9", 99.9),
                ("max", 100.0),
            ]
            .iter()
            .map(|(name, p)| {
                let bars = [&kv.puts, &kv.gets]
                    .iter()
                    .map(|phase| Some(millis(phase.latencies.percentile(*p))))
                    .collect();
                (name.to_string(), bars)
            })
            .collect(),
        });
    }
    if let Some(storm) = &report.storm {
        let latency = |p: f64| Some(millis(storm.latencies.percentile(p)));
        panels.push(Panel {
            title: format!(
                "Connection storm: {} connections at once, ms (log scale)",
                storm.connections
            ),
            log: true,
            series: vec!["Basalt".into()],
            groups: vec![
                (
                    "all answered".into(),
                    vec![Some(millis(storm.storms.best()))],
                ),
                ("one connection p50".into(), vec![latency(50.0)]),
                ("one connection p99".into(), vec![latency(99.0)]),
                ("one connection max".into(), vec![latency(100.0)]),
            ],
        });
    }

    let mut body = String::new();
    let mut y = 30.0;
    let _ = writeln!(
        body,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">basalt bench --size {} on {} cores ({}), basalt {} at {}</text>"#,
        report.size,
        report.machine.cores,
        escape(&report.machine.cpu),
        report.machine.basalt_version,
        escape(
            report
                .machine
                .git_commit
                .get(..12)
                .unwrap_or(&report.machine.git_commit)
        )
    );
    for panel in &panels {
        y = draw(&mut body, panel, y + 20.0);
    }
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#,
        h = y + 20.0
    )
}

/// Draws `panel` from `top`; returns where it ends.
fn draw(out: &mut String, panel: &Panel, top: f64) -> f64 {
    let values: Vec<f64> = panel
        .groups
        .iter()
        .flat_map(|(_, bars)| bars.iter().flatten())
        .copied()
        .filter(|v| *v > 0.0)
        .collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    let (low, high) = if panel.log {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        // Half a decade of room below the smallest bar, so it still shows.
        let low = 10f64.powf((min / 3.0).log10().floor());
        (low, 10f64.powf(max.log10().ceil().max(low.log10() + 1.0)))
    } else {
        (0.0, nice_step(max) * 5.0)
    };
    let scale = |v: f64| -> f64 {
        let fraction = if panel.log {
            (v.max(low).log10() - low.log10()) / (high.log10() - low.log10())
        } else {
            v / high.max(1e-12)
        };
        (fraction * BAR_AREA).clamp(1.0, BAR_AREA)
    };
    let _ = writeln!(
        out,
        r#"<text x="10" y="{top}" font-size="13" font-weight="bold">{}</text>"#,
        escape(&panel.title)
    );
    let mut x_legend = LABEL_WIDTH;
    for (i, name) in panel.series.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<rect x="{x_legend}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            top + 6.0,
            COLORS[i % COLORS.len()],
            x_legend + 14.0,
            top + 15.0,
            escape(name)
        );
        x_legend += 20.0 + 7.0 * name.len() as f64;
    }
    let mut y = top + 26.0;
    let chart_top = y;
    for (label, bars) in &panel.groups {
        let group_height = bars.len() as f64 * BAR_HEIGHT;
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LABEL_WIDTH - 8.0,
            y + group_height / 2.0 + 4.0,
            escape(label)
        );
        for (i, bar) in bars.iter().enumerate() {
            let bar_y = y + i as f64 * BAR_HEIGHT;
            match bar {
                Some(v) if *v > 0.0 => {
                    let w = scale(*v);
                    let _ = writeln!(
                        out,
                        r#"<rect x="{LABEL_WIDTH}" y="{bar_y}" width="{w:.1}" height="{}" fill="{}"/><text x="{:.1}" y="{}">{}</text>"#,
                        BAR_HEIGHT - 2.0,
                        COLORS[i % COLORS.len()],
                        LABEL_WIDTH + w + 4.0,
                        bar_y + BAR_HEIGHT - 3.0,
                        number(*v)
                    );
                }
                _ => {
                    let _ = writeln!(
                        out,
                        r##"<text x="{}" y="{}" fill="#888">n/a</text>"##,
                        LABEL_WIDTH + 4.0,
                        bar_y + BAR_HEIGHT - 3.0
                    );
                }
            }
        }
        y += group_height + GROUP_GAP;
    }
    // Axis ticks: powers of ten on a log scale, fifths of the range on a linear one.
    let ticks: Vec<f64> = if panel.log {
        let (a, b) = (low.log10().round() as i32, high.log10().round() as i32);
        (a..=b).map(|e| 10f64.powi(e)).collect()
    } else {
        let step = nice_step(max);
        (0..=5).map(|i| step * f64::from(i)).collect()
    };
    for tick in ticks {
        let x = LABEL_WIDTH
            + if panel.log || tick > 0.0 {
                scale(tick.max(1e-12))
            } else {
                0.0
            };
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{chart_top}" x2="{x:.1}" y2="{y}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
            y + 10.0,
            number(tick)
        );
    }
    y + 16.0
}

/// A round tick step (1, 2 or 5 times a power of ten) with which five steps reach `max`.
fn nice_step(max: f64) -> f64 {
    let rough = (max / 5.0).max(1e-12);
    let power = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * power)
}

fn number(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(703_000.0), 200_000.0);
        assert_eq!(nice_step(48.0), 10.0);
        assert_eq!(nice_step(5.0), 1.0);
        assert_eq!(number(0.0), "0");
        assert_eq!(number(616_000.0), "616k");
    }
}
