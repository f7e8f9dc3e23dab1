//! A query longer than `max_query_chars` (2,000) or than `max_query_words`
//! (256 distinct words) is searched up to the last whole word within the
//! limit, the answer says so in `query_cut`, and it repeats only the
//! query's first characters: a 64,000-word query costs what its first
//! 2,000 characters cost, and its answer stays a few hundred characters.

use quiver_tests::dispatch::fixture_with_shop;
use serde_json::{Value, json};

/// `count` distinct words no tool holds: `w00000x w00001x …`.
fn filler(count: usize) -> String {
    (0..count)
        .map(|i| format!("w{i:05}x"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn names(answer: &Value) -> Vec<&str> {
    answer["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["tool"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_query_of_64000_words_is_searched_up_to_its_first_2000_characters() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    let long = format!("create issue {}", filler(64_000));
    let answer = fixture
        .call(&session, "tool_search", json!({"query": long}))
        .await
        .unwrap();
    // The start was searched: the tool it names is found.
    assert_eq!(names(&answer)[0], "create_issue", "{answer}");
    let note = answer["query_cut"].as_str().unwrap();
    // "create issue" and 248 filler words, each after a space: 1,996.
    assert!(
        note.starts_with("Only the first 1996 of the query's 512012 characters (250 distinct words) were searched: a query is searched up to 2000 characters."),
        "{note}"
    );
    let echoed = answer["query"].as_str().unwrap();
    assert!(echoed.chars().count() <= 101, "{echoed}");
    assert!(long.starts_with(echoed.trim_end_matches('…')), "{echoed}");
    // Nothing else of the query comes back.
    let size = answer.to_string().chars().count();
    assert!(size < 2_000, "{size} characters: {answer}");

    // What follows the cut is not searched: the tool named there is not
    // found, and the whole answer is the note that no tool matched.
    let late = format!("{} delete repository", filler(64_000));
    let answer = fixture
        .call(&session, "tool_search", json!({"query": late}))
        .await
        .unwrap();
    assert!(names(&answer).is_empty(), "{answer}");
    assert!(answer["query_cut"].is_string(), "{answer}");
    let note = answer["note"].as_str().unwrap();
    assert!(
        note.starts_with("No deferred tool matched `w00000x"),
        "{note}"
    );
    assert!(note.chars().count() < 400, "{note}");
}

#[tokio::test]
async fn distinct_words_are_counted_and_repeats_are_free() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    // 300 distinct words in 2,099 characters: over the word limit first.
    let many = format!("{} delete repository", filler(300).replace('w', ""));
    let answer = fixture
        .call(&session, "tool_search", json!({"query": many}))
        .await
        .unwrap();
    let note = answer["query_cut"].as_str().unwrap();
    assert!(
        note.contains(
            "(256 distinct words) were searched: a query is searched up to 256 distinct words."
        ),
        "{note}"
    );
    assert!(!names(&answer).contains(&"delete_repo"), "{answer}");
    // The same word said 1,000 times is one word, and within 2,000
    // characters it is all searched.
    let repeated = format!("{}repository", "delete ".repeat(280));
    let answer = fixture
        .call(&session, "tool_search", json!({"query": repeated}))
        .await
        .unwrap();
    assert!(answer.get("query_cut").is_none(), "{answer}");
    assert_eq!(names(&answer)[0], "delete_repo", "{answer}");
    // A batch cuts each query on its own.
    let answer = fixture
        .call(
            &session,
            "tool_search",
            json!({"queries": ["list issues", format!("list issues {}", filler(1_000))]}),
        )
        .await
        .unwrap();
    let results = answer["results"].as_array().unwrap();
    assert!(results[0].get("query_cut").is_none(), "{answer}");
    assert!(results[1]["query_cut"].is_string(), "{answer}");
    assert_eq!(names(&results[1])[0], "list_issues", "{answer}");
}
