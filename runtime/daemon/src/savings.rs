//! The daemon's savings and activity over its life, for the console's
//! chart: a bounded in-memory series of the running totals of the
//! process's metrics (tokens of tool definitions with and without tool
//! search summed over every assembly, assemblies, tool calls, searches and
//! search misses).
//!
//! A sampler reads the totals [`SAMPLE_EVERY`] after the activity feed
//! records something (what arrives meanwhile is in the same sample) and
//! keeps a point only when they changed. An idle daemon records nothing,
//! so the sampler sleeps on the feed and never wakes it. The series
//! holds at most [`MAX_POINTS`]; when full, every other point is dropped
//! (the first and the newest are kept), so it always spans the whole life
//! at a coarser step rather than forgetting the start.
//!
//! Each point kept is also stored with the instance's id
//! (`Store::record_savings`), so `/v1/savings` shows every instance's
//! latest totals beside this one's series (one dashboard for a shared
//! store), and they outlive the process.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

/// How long after activity the sampler reads the totals: at most one
/// point per this much time.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// Most points kept.
pub const MAX_POINTS: usize = 240;

/// The running totals at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Point {
    /// When, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// Assemblies built (one per model turn step and gateway listing).
    pub assemblies: u64,
    /// Tokens of tool definitions sent, summed over those assemblies.
    pub tokens_with_tool_search: u64,
    /// Tokens they would have cost with every tool sent eagerly.
    pub tokens_without_tool_search: u64,
    /// Tool calls that ran through the dispatch chain.
    pub tool_calls: u64,
    /// `tool_search` queries.
    pub searches: u64,
    /// `tool_search` queries that matched nothing.
    pub search_misses: u64,
}

impl Point {
    /// The totals in the process's metrics now.
    pub fn now() -> Point {
        Point::from_metrics(&crate::telemetry::render(), quiver_store::now_ms())
    }

    /// The totals in a Prometheus text exposition.
    fn from_metrics(text: &str, time_ms: i64) -> Point {
        Point {
            time_ms,
            assemblies: sum(text, "quiver_assembly_tool_tokens_count", Some("with")),
            tokens_with_tool_search: sum(text, "quiver_assembly_tool_tokens_sum", Some("with")),
            tokens_without_tool_search: sum(
                text,
                "quiver_assembly_tool_tokens_sum",
                Some("without"),
            ),
            tool_calls: sum(text, "quiver_tool_calls_total", None),
            searches: sum(text, "quiver_tool_search_queries_total", None),
            search_misses: sum(text, "quiver_tool_search_empty_results_total", None),
        }
    }

    /// Whether the totals equal `other`'s (the time aside).
    fn same_totals(&self, other: &Point) -> bool {
        Point {
            time_ms: 0,
            ..*self
        } == Point {
            time_ms: 0,
            ..*other
        }
    }
}

/// The sum of every series of metric `name` (of `tool_search="which"`
/// only, when given), rounded down to a whole number.
fn sum(text: &str, name: &str, which: Option<&str>) -> u64 {
    let label = which.map(|w| format!("tool_search=\"{w}\""));
    let total: f64 = text
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.split_once('}')?,
                None if rest.starts_with(' ') => ("", rest),
                None => return None,
            };
            if label.as_deref().is_some_and(|l| !labels.contains(l)) {
                return None;
            }
            value.trim().parse::<f64>().ok()
        })
        .sum();
    total.max(0.0) as u64
}

/// The series; shared by the sampler and the API.
#[derive(Debug, Default)]
pub struct Series {
    points: Mutex<Vec<Point>>,
}

impl Series {
    /// Starts sampling the process's metrics on the current runtime after
    /// each burst of `activity` (the daemon's feed records); the sampler
    /// stops when the series is dropped or the feed closes.
    pub fn start<T: Clone + Send + 'static>(
        mut activity: tokio::sync::broadcast::Receiver<T>,
        store: Arc<dyn quiver_store::Store>,
        instance: String,
    ) -> Arc<Series> {
        use tokio::sync::broadcast::error::{RecvError, TryRecvError};
        let series = Arc::new(Series::default());
        series.add(Point::now());
        let weak = Arc::downgrade(&series);
        tokio::spawn(async move {
            loop {
                if let Err(RecvError::Closed) = activity.recv().await {
                    break;
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
                // What came meanwhile is in this sample.
                while !matches!(
                    activity.try_recv(),
                    Err(TryRecvError::Empty | TryRecvError::Closed)
                ) {}
                let Some(series) = weak.upgrade() else { break };
                let point = Point::now();
                if series.add(point) {
                    let sample = quiver_store::SavingsSample {
                        instance: instance.clone(),
                        time_ms: point.time_ms,
                        point: serde_json::to_value(point).unwrap_or_default(),
                    };
                    if let Err(error) = store.record_savings(&sample).await {
                        tracing::debug!(%error, "savings sample not stored");
                    }
                }
            }
        });
        series
    }

    /// Keeps `point` when its totals differ from the newest point's,
    /// thinning the series when it is full; whether it was kept.
    pub fn add(&self, point: Point) -> bool {
        let mut points = self.points.lock().unwrap_or_else(PoisonError::into_inner);
        if points.last().is_some_and(|last| last.same_totals(&point)) {
            return false;
        }
        if points.len() >= MAX_POINTS {
            let newest = points.pop();
            let mut index = 0;
            points.retain(|_| {
                index += 1;
                index % 2 == 1
            });
            points.extend(newest);
        }
        points.push(point);
        true
    }

    /// The points, oldest first.
    pub fn points(&self) -> Vec<Point> {
        self.points
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_are_read_from_the_metrics_text() {
        let text = "\
# TYPE quiver_assembly_tool_tokens histogram
quiver_assembly_tool_tokens_bucket{tool_search=\"with\",le=\"100\"} 0
quiver_assembly_tool_tokens_sum{tool_search=\"with\"} 300
quiver_assembly_tool_tokens_count{tool_search=\"with\"} 2
quiver_assembly_tool_tokens_sum{tool_search=\"without\"} 9000
quiver_assembly_tool_tokens_count{tool_search=\"without\"} 2
quiver_tool_calls_total{tool=\"a\",source=\"core\",status=\"ok\"} 3
quiver_tool_calls_total{tool=\"b\",source=\"plugin\",status=\"error\"} 1
quiver_tool_call_refusals_total{code=\"x\"} 7
quiver_tool_search_queries_total 5
quiver_tool_search_empty_results_total 1
";
        assert_eq!(
            Point::from_metrics(text, 1),
            Point {
                time_ms: 1,
                assemblies: 2,
                tokens_with_tool_search: 300,
                tokens_without_tool_search: 9000,
                tool_calls: 4,
                searches: 5,
                search_misses: 1,
            }
        );
    }

    #[test]
    fn unchanged_totals_add_nothing_and_a_full_series_thins_out() {
        let series = Series::default();
        let point = |time_ms, tool_calls| Point {
            time_ms,
            tool_calls,
            ..Point::default()
        };
        series.add(point(0, 0));
        series.add(point(1, 0));
        assert_eq!(series.points().len(), 1);
        for n in 1..=MAX_POINTS as u64 {
            series.add(point(n as i64, n));
        }
        let points = series.points();
        assert!(points.len() <= MAX_POINTS, "{}", points.len());
        assert_eq!(points[0].time_ms, 0, "the start is kept");
        assert_eq!(
            points.last().unwrap().tool_calls,
            MAX_POINTS as u64,
            "the newest is kept"
        );
        assert!(points.windows(2).all(|w| w[0].time_ms < w[1].time_ms));
    }
}
