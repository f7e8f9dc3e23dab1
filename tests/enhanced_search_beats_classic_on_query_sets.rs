//! `quiver catalog eval`: the enhanced ranking beats classic BM25 on every
//! small public query set, and each stays above a floor measured for it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use quiver_tests::{arg, catalog, quiver_json_lines};

/// (query set, classic floor, enhanced floor) for recall@5; the floors sit
/// a little under the figures in docs/RETRIEVAL.md.
const SETS: [(&str, f64, f64); 4] = [
    ("tool-search-mcp", 0.58, 0.72),
    ("livemcpbench", 0.26, 0.35),
    ("mcptoolbench-pp", 0.83, 0.92),
    ("api-bank", 0.47, 0.61),
];

fn eval(mode: &str) -> serde_json::Value {
    let files: Vec<_> = SETS
        .iter()
        .map(|(name, ..)| catalog(&format!("queries/{name}.json")))
        .collect();
    let mut args = vec!["catalog", "eval", "--json", "--k", "5", "--mode", mode];
    for file in &files {
        args.extend(["--queries", arg(file)]);
    }
    let mut lines = quiver_json_lines(&args);
    assert_eq!(lines.len(), 1);
    lines.remove(0)
}

#[test]
fn enhanced_beats_classic_on_every_small_set() {
    let classic = eval("classic");
    let enhanced = eval("enhanced");
    for (i, (name, classic_floor, enhanced_floor)) in SETS.iter().enumerate() {
        let c = &classic["sets"][i];
        let e = &enhanced["sets"][i];
        assert_eq!(c["name"], *name);
        let (cr, er) = (c["recall"].as_f64().unwrap(), e["recall"].as_f64().unwrap());
        println!("{name}: recall@5 classic {cr:.3} enhanced {er:.3}");
        assert!(er > cr, "{name}: enhanced {er} does not beat classic {cr}");
        assert!(
            cr >= *classic_floor,
            "{name}: classic {cr} < {classic_floor}"
        );
        assert!(
            er >= *enhanced_floor,
            "{name}: enhanced {er} < {enhanced_floor}"
        );
        for metric in ["hit", "mrr"] {
            let value = e[metric].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&value), "{name} {metric} {value}");
        }
        let listed = e["misses"].as_array().unwrap().len() as u64;
        assert!(e["miss_count"].as_u64().unwrap() >= listed);
    }
    assert_eq!(enhanced["mode"], "enhanced");
    assert!(
        enhanced["overall"]["recall"].as_f64().unwrap()
            > classic["overall"]["recall"].as_f64().unwrap()
    );
}
