//! The candle embedder gives all-MiniLM-L6-v2's vectors: those of an
//! independent numpy forward pass (`tests/third_party/embedding_reference.py`,
//! which also matches fastembed's and text-embeddings-inference's published
//! values for the model), alone, in a padded batch and as a search query
//! (its own pool, on every core), truncated at the
//! model's 256 tokens; a directory that is no model is a clear error.

use quiver_embed::{EmbedError, EmbedOptions, Embedder};
use quiver_tests::{minilm_model_dir, workspace_root};
use serde_json::Value;

fn reference() -> Value {
    let path = workspace_root().join("tests/fixtures/embeddings/all-minilm-l6-v2.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * y).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn vectors_match_the_reference_alone_and_batched() {
    let embedder = Embedder::load(&minilm_model_dir(), &EmbedOptions::default()).unwrap();
    assert_eq!(embedder.dimension(), 384);
    assert_eq!(embedder.max_tokens(), 256);
    assert!(embedder.normalizes());
    let reference = reference();
    let sentences = reference["sentences"].as_array().unwrap();
    let texts: Vec<&str> = sentences
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    let batched = embedder.embed(&texts).unwrap();
    for (at, sentence) in sentences.iter().enumerate() {
        let text = texts[at];
        let expected: Vec<f64> = sentence["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(
            embedder.token_count(text).unwrap() as u64,
            sentence["token_count"].as_u64().unwrap(),
            "token count of {text:?}"
        );
        let alone = embedder.embed(&[text]).unwrap().remove(0);
        // A search's query goes through its own pool, on every core.
        let query = embedder.embed_query(text).unwrap();
        for (how, vector) in [
            ("alone", &alone),
            ("in a batch", &batched[at]),
            ("as a query", &query),
        ] {
            let similarity = cosine(vector, &expected);
            let largest = vector
                .iter()
                .zip(&expected)
                .map(|(x, y)| (f64::from(*x) - y).abs())
                .fold(0.0f64, f64::max);
            assert!(
                similarity > 0.99999 && largest < 1e-4,
                "{text:?} {how}: cosine {similarity}, largest difference {largest}"
            );
        }
    }
    // Pairwise similarities as the reference has them.
    for pair in reference["cosine"].as_array().unwrap() {
        let (i, j) = (
            pair[0].as_u64().unwrap() as usize,
            pair[1].as_u64().unwrap() as usize,
        );
        let expected = pair[2].as_f64().unwrap();
        let got: f64 = batched[i]
            .iter()
            .zip(&batched[j])
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        assert!(
            (got - expected).abs() < 1e-4,
            "cosine {i}-{j}: {got} against {expected}"
        );
    }
}

#[test]
fn a_directory_that_is_no_model_is_named_in_the_error() {
    let empty = tempfile::tempdir().unwrap();
    let error = Embedder::load(empty.path(), &EmbedOptions::default()).unwrap_err();
    assert!(matches!(error, EmbedError::Missing { ref path } if path.ends_with("config.json")));
    assert!(error.to_string().contains("config.json"), "{error}");

    std::fs::write(
        empty.path().join("config.json"),
        r#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}"#,
    )
    .unwrap();
    let error = Embedder::load(empty.path(), &EmbedOptions::default()).unwrap_err();
    assert!(matches!(error, EmbedError::Unsupported { .. }), "{error}");
    assert!(error.to_string().contains("only BERT"), "{error}");

    std::fs::write(
        empty.path().join("config.json"),
        "{\"model_type\": \"bert\",\n  \"hidden_size\": \"wide\"}",
    )
    .unwrap();
    let error = Embedder::load(empty.path(), &EmbedOptions::default()).unwrap_err();
    assert!(
        matches!(error, EmbedError::Format { line: 2, .. }),
        "{error}"
    );
}
