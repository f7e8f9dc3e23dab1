//! `quiver catalog eval`: the enhanced ranking beats classic BM25 on every
//! small public query set, stays above a floor measured for it, and meets
//! the recall@5 target (docs/RETRIEVAL.md has the figures).

use quiver_tests::{arg, catalog, quiver_json_lines};

/// One small query set: its name, recall@5 floors for classic and
/// enhanced (a little under the figures in docs/RETRIEVAL.md), and the
/// issue's recall@5 target for enhanced.
struct Set {
    name: &'static str,
    classic_floor: f64,
    enhanced_floor: f64,
    target: f64,
}

const SETS: [Set; 4] = [
    Set {
        name: "tool-search-mcp",
        classic_floor: 0.58,
        enhanced_floor: 0.77,
        target: 0.75,
    },
    // 0.409: issue 40 removed the file-path hint and the coordinate
    // prerequisite, both read from this set's misses, which had taken it
    // over its earlier 0.42 target (docs/RETRIEVAL.md, eighth round).
    Set {
        name: "livemcpbench",
        classic_floor: 0.26,
        enhanced_floor: 0.40,
        target: 0.40,
    },
    Set {
        name: "mcptoolbench-pp",
        classic_floor: 0.83,
        enhanced_floor: 0.98,
        target: 0.95,
    },
    Set {
        name: "api-bank",
        classic_floor: 0.47,
        enhanced_floor: 0.77,
        target: 0.65,
    },
];

fn eval(mode: &str) -> serde_json::Value {
    let files: Vec<_> = SETS
        .iter()
        .map(|set| catalog(&format!("queries/{}.json", set.name)))
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
    for (i, set) in SETS.iter().enumerate() {
        let name = set.name;
        let c = &classic["sets"][i];
        let e = &enhanced["sets"][i];
        assert_eq!(c["name"], name);
        let (cr, er) = (c["recall"].as_f64().unwrap(), e["recall"].as_f64().unwrap());
        println!("{name}: recall@5 classic {cr:.3} enhanced {er:.3}");
        assert!(er > cr, "{name}: enhanced {er} does not beat classic {cr}");
        assert!(
            cr >= set.classic_floor,
            "{name}: classic {cr} < {}",
            set.classic_floor
        );
        assert!(
            er >= set.enhanced_floor,
            "{name}: enhanced {er} < {}",
            set.enhanced_floor
        );
        assert!(
            er >= set.target,
            "{name}: enhanced {er} misses its target {}",
            set.target
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
