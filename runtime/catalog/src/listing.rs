//! The token-budgeted listing of the deferred catalog that goes into the
//! `tool_search` description, and the choice of each group's form.
//!
//! Every group (one MCP server or one plugin) is shown in one of three forms:
//!
//! - full: a header line, then `- name: short description` per tool;
//! - names: the header and the tool names on one line;
//! - summary: one line with the group name and its tool count.
//!
//! The forms are chosen on every assembly so that the listing fits the
//! budget and never hides a tool it could name: a name is what lets a
//! model call a tool without searching, and costs a tenth of a described
//! line. First every group gets its names (the cheapest form that names
//! its tools); when they do not all fit, the most tools named, an exact
//! 0/1 knapsack solved by dynamic programming over the number of tools,
//! and the others collapse to their summary lines. Then the room left buys
//! descriptions, group by group: first the groups whose tools the session
//! has called (see [`plan_preferring`]), then the smallest group first: a
//! small server's few tools are described for the price of a few lines. When even the
//! summary lines do not fit, the listing keeps as many of them as fit, in
//! name order, and ends with `and N more servers`.
//!
//! Characters are additive, so each form's cost is computed without
//! building text, and only the chosen forms are rendered.

use std::fmt::Write as _;

use serde::Serialize;

use crate::catalog::{Catalog, CatalogGroup};
use quiver_tool::tokens;
use quiver_tool::tool::ToolSource;

/// How one group appears in the listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupMode {
    /// Every tool with its short description.
    Full,
    /// Every tool's name.
    Names,
    /// One line: the group and its tool count.
    Summary,
    /// Not shown (only counted in the `and N more servers` line, or the
    /// listing is off).
    Omitted,
}

/// The overall shape of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ListingForm {
    /// No listing: nothing is deferred.
    None,
    /// The listing is switched off in config.
    Off,
    /// Every group in full.
    Full,
    /// Every group names-only.
    Names,
    /// Some groups full, names-only or summarised.
    Mixed,
    /// Every group as a summary line (tier 2).
    Summary,
    /// Summary lines for some groups and an `and N more servers` line.
    Truncated,
}

/// The chosen form of one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupPlan {
    /// Server or plugin name.
    pub name: String,
    /// Deferred tools in the group.
    pub tools: usize,
    /// How it is shown.
    pub mode: GroupMode,
}

/// A rendered listing and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The exact text placed in the prompt.
    pub text: String,
    /// Its token count.
    pub tokens: u64,
    /// Per-group forms, in listing order.
    pub groups: Vec<GroupPlan>,
    /// The overall shape.
    pub form: ListingForm,
}

impl Listing {
    /// Whether any group is listed per tool (full or names): tier 1.
    pub fn lists_tools(&self) -> bool {
        self.groups
            .iter()
            .any(|g| matches!(g.mode, GroupMode::Full | GroupMode::Names))
    }

    /// A listing that shows nothing, with every group marked `mode`.
    pub fn empty(catalog: &Catalog, form: ListingForm) -> Listing {
        Listing {
            text: String::new(),
            tokens: 0,
            groups: catalog
                .groups()
                .iter()
                .map(|g| GroupPlan {
                    name: g.name().to_owned(),
                    tools: g.tools().len(),
                    mode: GroupMode::Omitted,
                })
                .collect(),
            form,
        }
    }
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

fn digits(n: usize) -> u64 {
    n.to_string().len() as u64
}

fn chars(text: &str) -> u64 {
    text.chars().count() as u64
}

/// `NAME (N tools):` — the header of the full and names forms, without the
/// line end.
fn header_chars(group: &CatalogGroup) -> u64 {
    let n = group.tools().len();
    chars(group.name()) + 2 + digits(n) + 1 + chars(plural(n, "tool", "tools")) + 2
}

/// Header line, then `- name: short description\n` per tool (`- name\n`
/// when it has no description).
fn full_chars(group: &CatalogGroup) -> u64 {
    let totals = group.totals();
    let n = group.tools().len() as u64;
    header_chars(group)
        + 1
        + 3 * n
        + totals.name_chars
        + 2 * totals.described
        + totals.short_description_chars
}

/// Header, a space, the names joined by `, `, a line end.
fn names_chars(group: &CatalogGroup) -> u64 {
    let n = group.tools().len() as u64;
    header_chars(group) + 1 + group.totals().name_chars + 2 * n.saturating_sub(1) + 1
}

/// `NAME: N tools\n`
fn summary_chars(group: &CatalogGroup) -> u64 {
    let n = group.tools().len();
    chars(group.name()) + 2 + digits(n) + 1 + chars(plural(n, "tool", "tools")) + 1
}

/// `and N more servers\n`
fn more_chars(hidden: usize) -> u64 {
    4 + digits(hidden) + 6 + chars(plural(hidden, "server", "servers")) + 1
}

fn render_header(out: &mut String, group: &CatalogGroup) {
    let n = group.tools().len();
    let _ = write!(
        out,
        "{} ({} {}):",
        group.name(),
        n,
        plural(n, "tool", "tools")
    );
}

fn render(out: &mut String, group: &CatalogGroup, mode: GroupMode) {
    let n = group.tools().len();
    match mode {
        GroupMode::Full => out.push_str(&group.rendered(true, || {
            let mut text = String::new();
            render_header(&mut text, group);
            text.push('\n');
            for tool in group.tools() {
                text.push_str("- ");
                text.push_str(tool.name());
                if !tool.short_description().is_empty() {
                    text.push_str(": ");
                    text.push_str(tool.short_description());
                }
                text.push('\n');
            }
            text
        })),
        GroupMode::Names => out.push_str(&group.rendered(false, || {
            let mut text = String::new();
            render_header(&mut text, group);
            text.push(' ');
            for (i, tool) in group.tools().iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                text.push_str(tool.name());
            }
            text.push('\n');
            text
        })),
        GroupMode::Summary => {
            let _ = writeln!(
                out,
                "{}: {} {}",
                group.name(),
                n,
                plural(n, "tool", "tools")
            );
        }
        GroupMode::Omitted => {}
    }
}

/// Largest `value` table the exact knapsack may use before it falls back to
/// a greedy choice by tools per character (only reachable with thousands of
/// groups that each fit the budget).
const MAX_KNAPSACK_CELLS: usize = 8_000_000;

/// Picks items (weight, value) maximising total value within `capacity`;
/// among equal values the lightest; deterministic. Returns chosen indices.
fn knapsack(items: &[(u64, u64)], capacity: u64) -> Vec<usize> {
    let candidates: Vec<usize> = (0..items.len())
        .filter(|&i| items.get(i).is_some_and(|&(w, v)| w <= capacity && v > 0))
        .collect();
    let total_weight: u64 = candidates
        .iter()
        .filter_map(|&i| items.get(i))
        .map(|i| i.0)
        .sum();
    if total_weight <= capacity {
        return candidates;
    }
    // Upper bound on reachable value: the fractional relaxation.
    let mut by_density = candidates.clone();
    by_density.sort_by(|&a, &b| {
        let (wa, va) = items.get(a).copied().unwrap_or_default();
        let (wb, vb) = items.get(b).copied().unwrap_or_default();
        // va/wa > vb/wb  <=>  va*wb > vb*wa (weights are positive here)
        (vb as u128 * wa.max(1) as u128)
            .cmp(&(va as u128 * wb.max(1) as u128))
            .then(a.cmp(&b))
    });
    let mut room = capacity;
    let mut bound = 0u64;
    for &i in &by_density {
        let (w, v) = items.get(i).copied().unwrap_or_default();
        if w <= room {
            room -= w;
            bound += v;
        } else {
            bound += (v as u128 * room as u128 / w.max(1) as u128) as u64;
            break;
        }
    }
    let width = bound as usize + 1;
    // Weights fit in 32 bits below `u32::MAX` (the capacity is a listing
    // budget in characters): half the memory to stream through per row.
    let capacity = match u32::try_from(capacity) {
        Ok(capacity) if capacity < u32::MAX => capacity,
        _ => return greedy(&by_density, items, capacity),
    };
    if width.saturating_mul(candidates.len()) > MAX_KNAPSACK_CELLS {
        return greedy(&by_density, items, u64::from(capacity));
    }
    const UNREACHABLE: u32 = u32::MAX;
    // `best[value]`: the least weight reaching `value` with the rows so far.
    let mut best = vec![UNREACHABLE; width];
    if let Some(first) = best.first_mut() {
        *first = 0;
    }
    // Each row reads the previous row's weights from a copy, so its loop
    // carries no dependence from one value to the next and the compiler
    // runs it several values at a time; the values it improved are
    // recorded after, one bit per (row, value): an eighth of a bool table,
    // which at thousands of tools would be large enough to be mapped fresh
    // (and page-faulted in) on every plan.
    let mut before = vec![UNREACHABLE; width];
    let mut took = vec![0u64; (width * candidates.len()).div_ceil(64)];
    let bit = |at: usize| (at / 64, 1u64 << (at % 64));
    // Values above the rows so far's total are unreachable: each row
    // scans up to that total only, not the whole width.
    let mut reachable = 0usize;
    for (row, &i) in candidates.iter().enumerate() {
        let (w, v) = items.get(i).copied().unwrap_or_default();
        // A candidate weighs at most the capacity.
        let w = u32::try_from(w).unwrap_or(UNREACHABLE);
        let v = v as usize;
        reachable = (reachable + v).min(width - 1);
        let end = reachable + 1;
        let (Some(now), Some(was)) = (best.get_mut(..end), before.get_mut(..end)) else {
            continue;
        };
        was.copy_from_slice(now);
        let (Some(scanned), Some(from)) = (now.get_mut(v..), was.get(..end - v)) else {
            continue;
        };
        for (current, &from) in scanned.iter_mut().zip(from) {
            let weight = from.saturating_add(w);
            if weight <= capacity && weight < *current {
                *current = weight;
            }
        }
        let unchanged = was.get(v..).unwrap_or_default();
        for (offset, (&now, &was)) in scanned.iter().zip(unchanged).enumerate() {
            if now != was {
                let (word, mask) = bit(row * width + v + offset);
                if let Some(word) = took.get_mut(word) {
                    *word |= mask;
                }
            }
        }
    }
    let Some(mut value) = (0..width)
        .rev()
        .find(|&v| best.get(v).is_some_and(|&w| w != UNREACHABLE))
    else {
        return Vec::new();
    };
    let mut chosen = Vec::new();
    for (row, &i) in candidates.iter().enumerate().rev() {
        let (word, mask) = bit(row * width + value);
        if value > 0 && took.get(word).is_some_and(|w| w & mask != 0) {
            chosen.push(i);
            value -= items.get(i).map_or(0, |&(_, v)| v as usize);
        }
    }
    chosen.sort_unstable();
    chosen
}

/// The greedy choice by value per weight, densest first, for tables too
/// large for the exact knapsack.
fn greedy(by_density: &[usize], items: &[(u64, u64)], capacity: u64) -> Vec<usize> {
    let mut room = capacity;
    let mut chosen = Vec::new();
    for &i in by_density {
        let (w, _) = items.get(i).copied().unwrap_or_default();
        if w <= room {
            room -= w;
            chosen.push(i);
        }
    }
    chosen.sort_unstable();
    chosen
}

/// Chooses each group's form within `budget_tokens` and renders the listing.
pub fn plan(catalog: &Catalog, budget_tokens: u64) -> Listing {
    plan_preferring(catalog, budget_tokens, &[])
}

/// As [`plan`], describing the groups of `preferred` (the servers and
/// plugins the session has called) before the others: a server a session
/// works with is the one whose descriptions it needs.
pub fn plan_preferring(catalog: &Catalog, budget_tokens: u64, preferred: &[ToolSource]) -> Listing {
    let groups = catalog.groups();
    if groups.is_empty() {
        return Listing::empty(catalog, ListingForm::None);
    }
    let capacity = tokens::chars_for_tokens(budget_tokens);
    let summary: Vec<u64> = groups.iter().map(summary_chars).collect();
    let base: u64 = summary.iter().sum();
    let mut modes = vec![GroupMode::Summary; groups.len()];

    if base > capacity {
        // Tier 2, truncated: as many summary lines as fit, then the rest counted.
        let mut used = 0u64;
        let mut shown = 0usize;
        for (i, &cost) in summary.iter().enumerate() {
            let hidden_after = groups.len() - i - 1;
            let tail = if hidden_after > 0 {
                more_chars(hidden_after)
            } else {
                0
            };
            if used + cost + tail <= capacity {
                used += cost;
                shown = i + 1;
            } else {
                break;
            }
        }
        // If no prefix fits with its tail line, fall back to the bare
        // count line alone, and to nothing when even that does not fit.
        if shown == 0 && more_chars(groups.len()) > capacity {
            return finish(catalog, vec![GroupMode::Omitted; groups.len()], None);
        }
        for mode in modes.iter_mut().skip(shown) {
            *mode = GroupMode::Omitted;
        }
        return finish(
            catalog,
            modes,
            Some(groups.len() - shown).filter(|&h| h > 0),
        );
    }

    // Names first: every group's names when they all fit, else the most
    // tools named (an exact knapsack over the room the summary lines leave).
    let room = capacity - base;
    let names_items: Vec<(u64, u64)> = groups
        .iter()
        .zip(&summary)
        .map(|(g, &s)| (names_chars(g).saturating_sub(s), g.tools().len() as u64))
        .collect();
    let mut left = room;
    for i in knapsack(&names_items, room) {
        if let (Some(mode), Some(&(w, _))) = (modes.get_mut(i), names_items.get(i)) {
            *mode = GroupMode::Names;
            left -= w;
        }
    }
    // Then descriptions, in what is left: named groups go full one by
    // one, those the session used first, then the smallest first (by
    // tools, then listing order), each one that still fits.
    let mut by_size: Vec<usize> = (0..groups.len())
        .filter(|&i| modes.get(i) == Some(&GroupMode::Names))
        .collect();
    by_size.sort_by_key(|&i| {
        let group = groups.get(i);
        let used = group.is_some_and(|g| preferred.contains(g.source()));
        (!used, group.map_or(0, |g| g.tools().len()), i)
    });
    for i in by_size {
        let (Some(group), Some(mode)) = (groups.get(i), modes.get_mut(i)) else {
            continue;
        };
        let extra = full_chars(group).saturating_sub(names_chars(group));
        if extra <= left {
            left -= extra;
            *mode = GroupMode::Full;
        }
    }
    finish(catalog, modes, None)
}

fn finish(catalog: &Catalog, modes: Vec<GroupMode>, hidden: Option<usize>) -> Listing {
    let groups = catalog.groups();
    let mut text = String::new();
    for (group, &mode) in groups.iter().zip(&modes) {
        render(&mut text, group, mode);
    }
    if let Some(hidden) = hidden {
        let _ = writeln!(
            text,
            "and {} more {}",
            hidden,
            plural(hidden, "server", "servers")
        );
    }
    let all = |m: GroupMode| modes.iter().all(|&x| x == m);
    let form = if hidden.is_some() || (all(GroupMode::Omitted) && !modes.is_empty()) {
        ListingForm::Truncated
    } else if all(GroupMode::Full) {
        ListingForm::Full
    } else if all(GroupMode::Names) {
        ListingForm::Names
    } else if all(GroupMode::Summary) {
        ListingForm::Summary
    } else {
        ListingForm::Mixed
    };
    Listing {
        tokens: tokens::count(&text),
        text,
        groups: groups
            .iter()
            .zip(modes)
            .map(|(g, mode)| GroupPlan {
                name: g.name().to_owned(),
                tools: g.tools().len(),
                mode,
            })
            .collect(),
        form,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ToolSearchConfig;
    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::scope::Scope;
    use quiver_tool::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    /// A catalog with servers of the given sizes; every tool has a
    /// 40-character description.
    fn catalog(servers: &[(&str, usize)]) -> Catalog {
        let registry = ToolRegistry::new();
        for &(server, n) in servers {
            let specs = (0..n)
                .map(|i| {
                    ToolSpec::new(
                        format!("tool{i:04}"),
                        "d".repeat(40),
                        json!({"type": "object"}),
                    )
                })
                .collect();
            registry.set_source_tools(ToolSource::Mcp(server.into()), specs);
        }
        Catalog::build(
            &registry.snapshot(),
            &Scope::all(),
            &ToolSearchConfig::default(),
            true,
        )
    }

    #[test]
    fn a_later_catalog_reuses_unchanged_groups_lines_under_their_new_name() {
        let registry = ToolRegistry::new();
        let specs = |names: &[&str]| -> Vec<ToolSpec> {
            names
                .iter()
                .map(|n| ToolSpec::new(*n, format!("Does {n}."), json!({"type": "object"})))
                .collect()
        };
        registry.set_source_tools(ToolSource::Mcp("docs".into()), specs(&["find", "read"]));
        registry.set_source_tools(ToolSource::Plugin("text".into()), specs(&["count"]));
        let assembler = crate::assembly::Assembler::new(ToolSearchConfig::default());
        let listing = || {
            let assembly = assembler.assemble(&registry.snapshot(), &Scope::all(), 200_000);
            assembly.listing().text.clone()
        };
        let full = listing();
        assert!(
            full.contains("docs (2 tools):\n- mcp_docs_find: Does find.\n"),
            "{full}"
        );
        // Only the plugin changes: the server's lines are the first
        // catalog's, and still right.
        registry.set_source_tools(ToolSource::Plugin("text".into()), specs(&["count", "wrap"]));
        let after = listing();
        assert!(
            after.starts_with("docs (2 tools):\n- mcp_docs_find: Does find.\n"),
            "{after}"
        );
        assert!(
            after.contains("text (2 tools):\n- count: Does count.\n- wrap: Does wrap.\n"),
            "{after}"
        );
        // A plugin called `docs` arrives: the server, unchanged, is now
        // listed as `mcp-docs`, never under the name its lines were made with.
        registry.set_source_tools(ToolSource::Plugin("docs".into()), specs(&["lint"]));
        let labelled = listing();
        assert!(
            labelled.contains("mcp-docs (2 tools):\n- mcp_docs_find"),
            "{labelled}"
        );
        assert!(
            labelled.contains("plugin-docs (1 tool):\n- lint"),
            "{labelled}"
        );
        assert!(!labelled.contains("\ndocs ("), "{labelled}");
        assert!(!labelled.starts_with("docs ("), "{labelled}");
    }

    fn modes(listing: &Listing) -> Vec<(String, GroupMode)> {
        listing
            .groups
            .iter()
            .map(|g| (g.name.clone(), g.mode))
            .collect()
    }

    #[test]
    fn computed_costs_equal_rendered_lengths() {
        let catalog = catalog(&[("a", 1), ("bb", 12)]);
        for group in catalog.groups() {
            for (mode, cost) in [
                (GroupMode::Full, full_chars(group)),
                (GroupMode::Names, names_chars(group)),
                (GroupMode::Summary, summary_chars(group)),
            ] {
                let mut text = String::new();
                render(&mut text, group, mode);
                assert_eq!(chars(&text), cost, "{mode:?} of {}", group.name());
            }
        }
        assert_eq!(more_chars(1), chars("and 1 more server\n"));
        assert_eq!(more_chars(12), chars("and 12 more servers\n"));
    }

    #[test]
    fn everything_full_when_it_fits() {
        let listing = plan(&catalog(&[("a", 3), ("b", 2)]), 20_000);
        assert_eq!(listing.form, ListingForm::Full);
        assert!(
            listing
                .text
                .starts_with("a (3 tools):\n- mcp_a_tool0000: dddd")
        );
        assert!(listing.lists_tools());
    }

    #[test]
    fn oversized_server_collapses_while_small_ones_stay_full() {
        let catalog = catalog(&[("big", 3000), ("small1", 5), ("small2", 8)]);
        let listing = plan(&catalog, 2_000);
        assert!(listing.tokens <= 2_000);
        assert_eq!(
            modes(&listing),
            [
                ("big".to_owned(), GroupMode::Summary),
                ("small1".to_owned(), GroupMode::Full),
                ("small2".to_owned(), GroupMode::Full),
            ]
        );
        assert_eq!(listing.form, ListingForm::Mixed);
        assert!(listing.text.starts_with("big: 3000 tools\n"));
    }

    #[test]
    fn names_fill_the_room_left_after_descriptions() {
        // Full lines are ~60 chars, names ~16: a budget where one server
        // fits in full and another only by name.
        let catalog = catalog(&[("a", 20), ("b", 20)]);
        let a = &catalog.groups()[0];
        let budget_chars = full_chars(a) + names_chars(&catalog.groups()[1]);
        let budget = budget_chars.div_ceil(4);
        let listing = plan(&catalog, budget);
        let got = modes(&listing);
        assert!(
            got.contains(&("a".to_owned(), GroupMode::Full))
                || got.contains(&("b".to_owned(), GroupMode::Full))
        );
        assert!(got.iter().any(|(_, m)| *m == GroupMode::Names), "{got:?}");
        assert!(listing.tokens <= budget);
    }

    /// Characters of `groups` in `mode`s, as the plan counts them.
    fn cost(catalog: &Catalog, modes: &[GroupMode]) -> u64 {
        catalog
            .groups()
            .iter()
            .zip(modes)
            .map(|(g, mode)| match mode {
                GroupMode::Full => full_chars(g),
                GroupMode::Names => names_chars(g),
                GroupMode::Summary => summary_chars(g),
                GroupMode::Omitted => 0,
            })
            .sum()
    }

    #[test]
    fn every_name_comes_before_any_description() {
        use GroupMode::{Full, Names, Summary};
        let catalog = catalog(&[("a", 20), ("b", 20)]);
        // Room for one server in full and the other summarised (20 tools
        // described), but not for one in full and the other named: both
        // servers' names win (40 tools named, none described).
        let budget = cost(&catalog, &[Full, Summary]).div_ceil(4);
        assert!(cost(&catalog, &[Full, Names]) > budget * 4);
        let listing = plan(&catalog, budget);
        assert_eq!(listing.form, ListingForm::Names, "{}", listing.text);
        // A server is summarised only when its names do not fit.
        let budget = cost(&catalog, &[Names, Summary]).div_ceil(4);
        let got: Vec<GroupMode> = plan(&catalog, budget)
            .groups
            .iter()
            .map(|g| g.mode)
            .collect();
        assert_eq!(got, [Names, Summary]);
    }

    #[test]
    fn descriptions_go_to_the_smallest_servers_first() {
        use GroupMode::{Full, Names};
        // `big` sorts first, and describing it would describe more tools.
        let catalog = catalog(&[("big", 40), ("mid", 10), ("small", 3)]);
        let budget = cost(&catalog, &[Full, Names, Full]).div_ceil(4);
        let got: Vec<GroupMode> = plan(&catalog, budget)
            .groups
            .iter()
            .map(|g| g.mode)
            .collect();
        assert_eq!(got, [Names, Full, Full]);
    }

    #[test]
    fn descriptions_go_to_the_servers_the_session_used_first() {
        use GroupMode::{Full, Names};
        let catalog = catalog(&[("big", 40), ("mid", 10), ("small", 3)]);
        // Room for `big` in full and the others named: unpreferred, the
        // two small ones are described instead.
        let budget = cost(&catalog, &[Full, Names, Names]).div_ceil(4);
        let modes = |preferred: &[ToolSource]| -> Vec<GroupMode> {
            plan_preferring(&catalog, budget, preferred)
                .groups
                .iter()
                .map(|g| g.mode)
                .collect()
        };
        assert_eq!(modes(&[]), [Names, Full, Full]);
        assert_eq!(
            modes(&[ToolSource::Mcp("big".into())]),
            [Full, Names, Names]
        );
        // The room left after the used server still goes smallest first.
        assert_eq!(modes(&[ToolSource::Mcp("mid".into())]), [Names, Full, Full]);
        // A plugin of the same name is another source.
        assert_eq!(
            modes(&[ToolSource::Plugin("big".into())]),
            [Names, Full, Full]
        );
    }

    #[test]
    fn knapsack_is_exact_where_greedy_is_not() {
        // Greedy by density takes item 0 (value 6 for 5) and then nothing
        // fits; the best is items 1 and 2 (value 8 for 8).
        let items = [(5, 6), (4, 4), (4, 4)];
        assert_eq!(knapsack(&items, 8), vec![1, 2]);
        assert_eq!(knapsack(&items, 100), vec![0, 1, 2]);
        assert!(knapsack(&items, 3).is_empty());
    }

    proptest::proptest! {
        /// The knapsack's choice is an optimum of every subset: the
        /// greatest value within the capacity, and the least weight among
        /// those.
        #[test]
        fn knapsack_matches_every_subset(
            items in proptest::collection::vec((0u64..60, 0u64..20), 0..11),
            capacity in 0u64..200,
        ) {
            let mut best: Option<(u64, std::cmp::Reverse<u64>)> = None;
            for mask in 0u32..(1 << items.len()) {
                let chosen: Vec<usize> = (0..items.len()).filter(|i| mask & (1 << i) != 0).collect();
                let weight: u64 = chosen.iter().map(|&i| items[i].0).sum();
                let value: u64 = chosen.iter().map(|&i| items[i].1).sum();
                if weight <= capacity {
                    let key = (value, std::cmp::Reverse(weight));
                    if best.as_ref().is_none_or(|b| key > *b) {
                        best = Some(key);
                    }
                }
            }
            let picked = knapsack(&items, capacity);
            let weight: u64 = picked.iter().map(|&i| items[i].0).sum();
            let value: u64 = picked.iter().map(|&i| items[i].1).sum();
            let (best_value, std::cmp::Reverse(best_weight)) = best.unwrap();
            proptest::prop_assert!(weight <= capacity);
            proptest::prop_assert_eq!((value, weight), (best_value, best_weight));
        }
    }

    #[test]
    fn tier_two_summary_lines_then_truncation() {
        let catalog = catalog(&[("a", 500), ("b", 500), ("c", 500)]);
        let listing = plan(&catalog, 12);
        assert_eq!(listing.form, ListingForm::Summary);
        assert!(!listing.lists_tools());
        assert_eq!(listing.text, "a: 500 tools\nb: 500 tools\nc: 500 tools\n");
        let listing = plan(&catalog, 8);
        assert_eq!(listing.form, ListingForm::Truncated);
        assert_eq!(listing.text, "a: 500 tools\nand 2 more servers\n");
        assert!(listing.tokens <= 8);
        let listing = plan(&catalog, 1);
        assert_eq!(listing.text, "");
        assert_eq!(listing.tokens, 0);
    }

    #[test]
    fn listing_never_exceeds_the_budget() {
        let catalog = catalog(&[("a", 7), ("b", 30), ("c", 2), ("d", 90), ("e", 1)]);
        for budget in (0..1_500).step_by(7) {
            let listing = plan(&catalog, budget);
            assert!(
                listing.tokens <= budget,
                "budget {budget}: {}",
                listing.tokens
            );
            assert_eq!(listing.tokens, tokens::count(&listing.text));
        }
    }

    #[test]
    fn more_budget_never_lists_fewer_named_or_described_tools() {
        let catalog = catalog(&[("a", 7), ("b", 30), ("c", 2), ("d", 90), ("e", 1)]);
        let described = |l: &Listing| -> usize {
            l.groups
                .iter()
                .filter(|g| g.mode == GroupMode::Full)
                .map(|g| g.tools)
                .sum()
        };
        let named = |l: &Listing| -> usize {
            l.groups
                .iter()
                .filter(|g| matches!(g.mode, GroupMode::Full | GroupMode::Names))
                .map(|g| g.tools)
                .sum()
        };
        let (mut last_described, mut last_named) = (0, 0);
        for budget in (0..3_000).step_by(11) {
            let listing = plan(&catalog, budget);
            let (d, n) = (described(&listing), named(&listing));
            assert!(n >= last_named, "budget {budget}: {n} named < {last_named}");
            // Descriptions grow while the names stay the same; a budget
            // that names one more server may describe fewer tools.
            if n == last_named {
                assert!(
                    d >= last_described,
                    "budget {budget}: {d} < {last_described}"
                );
            }
            (last_described, last_named) = (d, n);
        }
    }
}
