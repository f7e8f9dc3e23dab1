//! Argument validation against the tool's JSON Schema (the `jsonschema`
//! crate, default features off: no remote `$ref`s). On failure the tool is
//! not invoked; the error lists every problem with its JSON pointer and
//! carries the schema so that the model can retry at once.
//!
//! A tool whose source declares an output schema has its structured result
//! checked against it too ([`OutputValidationLayer`]): a result that does
//! not match is an `invalid_output` error, not data the model trusts.
//!
//! Compiled validators are cached per tool (the `Arc<Tool>` itself, so a
//! tool re-registered with a new schema gets a new validator).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use jsonschema::Validator;
use serde_json::{Value, json};
use tower::{Layer, Service};

use super::{BoxFuture, ChainService, DispatchCall, DispatchError, ExecuteError, ToolOutput};
use quiver_tool::executor::{ToolError, ToolErrorKind};
use quiver_tool::tool::{Tool, ToolSource};

/// One way the arguments miss the schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// JSON pointer into the arguments (`""` is the arguments object).
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

/// Arguments that do not match the tool's schema; the tool was not called.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{tool}` was not called: its arguments do not match its schema: {}", summary(.problems))]
pub struct InvalidArguments {
    /// The tool.
    pub tool: String,
    /// Every problem found.
    pub problems: Vec<Problem>,
    /// The tool's input schema.
    pub schema: Value,
}

fn summary(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| {
            let at = if p.pointer.is_empty() {
                "(root)"
            } else {
                &p.pointer
            };
            format!("{at}: {}", p.message)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl InvalidArguments {
    /// The error as the JSON tool result: `{"error": "invalid_arguments",
    /// "message", "problems": [{"pointer", "message"}], "input_schema"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "error": "invalid_arguments",
            "message": self.to_string(),
            "problems": self.problems,
            "input_schema": self.schema,
        })
    }
}

/// A compiled schema, or why the tool's schema does not compile.
type Compiled = Arc<Result<Validator, String>>;

/// Compiled validators by tool name, replaced when the tool changes.
#[derive(Default)]
pub struct ValidatorCache {
    entries: Mutex<HashMap<String, (Arc<Tool>, Compiled)>>,
}

impl std::fmt::Debug for ValidatorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValidatorCache").finish_non_exhaustive()
    }
}

impl ValidatorCache {
    fn get(&self, tool: &Arc<Tool>) -> Compiled {
        if let Some((cached, validator)) = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool.name())
            && Arc::ptr_eq(cached, tool)
        {
            return validator.clone();
        }
        // OpenAPI's `nullable: true` is read as JSON Schema's `[T, "null"]`.
        let widened = crate::coerce::nullable_as_type(tool.input_schema().value());
        let schema = widened.as_ref().unwrap_or(tool.input_schema().value());
        let compiled = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string()));
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool.name().to_owned(), (tool.clone(), compiled.clone()));
        compiled
    }

    /// Checks `arguments` against `tool`'s schema.
    pub fn check(&self, tool: &Arc<Tool>, arguments: &Value) -> Result<(), InvalidArguments> {
        let validator = self.get(tool);
        let problems: Vec<Problem> = match validator.as_ref() {
            Ok(validator) => validator
                .iter_errors(arguments)
                .map(|e| Problem {
                    pointer: e.instance_path().as_str().to_owned(),
                    message: e.to_string(),
                })
                .collect(),
            Err(reason) => vec![Problem {
                pointer: String::new(),
                message: format!(
                    "the tool's own input schema is invalid ({reason}), so its arguments cannot be checked"
                ),
            }],
        };
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidArguments {
                tool: tool.name().to_owned(),
                problems,
                schema: tool.input_schema().value().clone(),
            })
        }
    }
}

/// Adds [`Validation`] around a service.
#[derive(Debug, Clone, Default)]
pub struct ValidationLayer {
    cache: Arc<ValidatorCache>,
}

impl ValidationLayer {
    /// A layer with its own validator cache.
    pub fn new() -> ValidationLayer {
        ValidationLayer::default()
    }
}

impl<S> Layer<S> for ValidationLayer {
    type Service = Validation<S>;
    fn layer(&self, inner: S) -> Validation<S> {
        Validation {
            cache: self.cache.clone(),
            inner,
        }
    }
}

/// Refuses calls whose arguments miss the schema.
#[derive(Debug, Clone)]
pub struct Validation<S> {
    cache: Arc<ValidatorCache>,
    inner: S,
}

impl<S: ChainService> Service<DispatchCall> for Validation<S> {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        match self.cache.check(&call.tool, &call.arguments) {
            Ok(()) => self.inner.call(call),
            Err(invalid) => Box::pin(std::future::ready(Err(invalid.into()))),
        }
    }
}

/// Compiled output schemas by tool name, replaced when the tool changes.
#[derive(Default)]
pub struct OutputValidators {
    entries: Mutex<HashMap<String, (Arc<Tool>, Compiled)>>,
}

impl std::fmt::Debug for OutputValidators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputValidators").finish_non_exhaustive()
    }
}

impl OutputValidators {
    fn get(&self, tool: &Arc<Tool>, schema: &Value) -> Compiled {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cached, validator)) = entries.get(tool.name())
            && Arc::ptr_eq(cached, tool)
        {
            return validator.clone();
        }
        let compiled = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string()));
        entries.insert(tool.name().to_owned(), (tool.clone(), compiled.clone()));
        compiled
    }

    /// Checks `output` of `tool` against its declared output schema: an
    /// MCP tool's `structured_content` (absent: nothing to check), another
    /// source's whole result. `Ok` when the tool declares none, or its
    /// schema does not compile (the source's fault, logged, not the
    /// result's).
    pub fn check(&self, tool: &Arc<Tool>, output: &Value) -> Result<(), ExecuteError> {
        let Some(schema) = tool.metadata().and_then(|m| m.output_schema.as_ref()) else {
            return Ok(());
        };
        let structured = match tool.source() {
            ToolSource::Mcp(_) => match output.get("structured_content") {
                Some(structured) => structured,
                None => return Ok(()),
            },
            _ => output,
        };
        let validator = self.get(tool, schema);
        let validator = match validator.as_ref() {
            Ok(validator) => validator,
            Err(reason) => {
                tracing::debug!(tool = tool.name(), %reason, "the output schema does not compile; results are not checked");
                return Ok(());
            }
        };
        let problems: Vec<Problem> = validator
            .iter_errors(structured)
            .map(|e| Problem {
                pointer: e.instance_path().as_str().to_owned(),
                message: e.to_string(),
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        let error = ToolError::new(
            ToolErrorKind::Failed,
            "invalid_output",
            format!(
                "returned a structured result that does not match its output schema: {}",
                summary(&problems)
            ),
        )
        .with_data(json!({
            "problems": problems,
            "output_schema": schema,
            "structured_content": structured,
        }));
        Err(ExecuteError {
            tool: tool.name().to_owned(),
            error,
        })
    }
}

/// Adds [`OutputValidation`] around a service (the executor: it sees the
/// result before any cap cuts it).
#[derive(Debug, Clone, Default)]
pub struct OutputValidationLayer {
    validators: Arc<OutputValidators>,
}

impl OutputValidationLayer {
    /// A layer with its own validator cache.
    pub fn new() -> OutputValidationLayer {
        OutputValidationLayer::default()
    }
}

impl<S> Layer<S> for OutputValidationLayer {
    type Service = OutputValidation<S>;
    fn layer(&self, inner: S) -> OutputValidation<S> {
        OutputValidation {
            validators: self.validators.clone(),
            inner,
        }
    }
}

/// Turns results that miss their tool's output schema into errors.
#[derive(Debug, Clone)]
pub struct OutputValidation<S> {
    validators: Arc<OutputValidators>,
    inner: S,
}

impl<S: ChainService> Service<DispatchCall> for OutputValidation<S> {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        let tool = call.tool.clone();
        let validators = self.validators.clone();
        let run = self.inner.call(call);
        Box::pin(async move {
            let output = run.await?;
            validators.check(&tool, &output.content)?;
            Ok(output)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_tool::tool::{ToolSource, ToolSpec};

    #[test]
    fn every_problem_is_listed_with_its_pointer() {
        let tool = Arc::new(Tool::new(
            "t".into(),
            ToolSource::Core,
            &ToolSpec::new(
                "t",
                "",
                json!({"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["title"]}),
            ),
        ));
        let cache = ValidatorCache::default();
        let err = cache
            .check(&tool, &json!({"n": "x", "tags": ["a", 3]}))
            .unwrap_err();
        let mut pointers: Vec<&str> = err.problems.iter().map(|p| p.pointer.as_str()).collect();
        pointers.sort();
        assert_eq!(pointers, ["", "/n", "/tags/1"]);
        assert_eq!(err.to_json()["input_schema"]["required"], json!(["title"]));
        assert!(cache.check(&tool, &json!({"title": "x", "n": 3})).is_ok());
    }

    #[test]
    fn an_invalid_schema_refuses_the_call() {
        let tool = Arc::new(Tool::new(
            "t".into(),
            ToolSource::Core,
            &ToolSpec::new("t", "", json!({"type": "nonsense"})),
        ));
        assert!(ValidatorCache::default().check(&tool, &json!({})).is_err());
    }
}
