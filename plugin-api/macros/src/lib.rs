//! `#[tool]`, the attribute that turns a plain Rust function into a typed
//! Quiver plugin tool; use it through `quiver_plugin_api::tool`.
//!
//! ```ignore
//! /// Count the words of a text.
//! #[tool(read_only, idempotent)]
//! fn word_count(args: WordCountArgs) -> Result<WordCount, ToolError> { ... }
//! ```
//!
//! The function keeps its name and body. Beside it the attribute writes a
//! hidden module of the same name (modules and functions live in different
//! namespaces) holding `__quiver_tool()`, which builds the tool: its name,
//! its description (the `description` argument, else the doc comment), the
//! input schema derived from the argument type, the output schema derived
//! from the result type and the behaviour hints. `quiver_plugin_api::plugin!`
//! lists the functions and finds each tool there.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, FnArg, ItemFn, Lit, Meta, Token, parse_macro_input};

/// Makes a plugin tool of a function `fn NAME(args: A) -> Result<O,
/// ToolError>` (or `fn NAME() -> Result<O, ToolError>`), where `A:
/// Deserialize + JsonSchema` and `O: Serialize + JsonSchema`.
///
/// Arguments, all optional: `description = "..."` (default: the doc
/// comment), `name = "..."` (default: the function's name), `title =
/// "..."`, and the MCP behaviour hints `read_only`, `destructive`,
/// `idempotent`, `open_world` (alone for `true`, or `= false`).
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let arguments = parse_macro_input!(attr with Punctuated::<Meta, Token![,]>::parse_terminated);
    let function = parse_macro_input!(item as ItemFn);
    match expand(arguments, function) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

#[derive(Default)]
struct ToolArguments {
    name: Option<String>,
    description: Option<String>,
    title: Option<String>,
    read_only: Option<bool>,
    destructive: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
}

const KNOWN: &str = "description, name, title, read_only, destructive, idempotent or open_world";

fn string_value(expr: &Expr) -> syn::Result<String> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) => Ok(text.value()),
        other => Err(syn::Error::new_spanned(other, "expected a string literal")),
    }
}

fn bool_value(expr: &Expr) -> syn::Result<bool> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(value),
            ..
        }) => Ok(value.value),
        other => Err(syn::Error::new_spanned(other, "expected `true` or `false`")),
    }
}

fn parse_arguments(metas: Punctuated<Meta, Token![,]>) -> syn::Result<ToolArguments> {
    let mut out = ToolArguments::default();
    for meta in metas {
        let path = meta.path().clone();
        let Some(key) = path.get_ident().map(ToString::to_string) else {
            return Err(syn::Error::new_spanned(path, format!("expected {KNOWN}")));
        };
        let hint = |meta: &Meta| -> syn::Result<Option<bool>> {
            match meta {
                Meta::Path(_) => Ok(Some(true)),
                Meta::NameValue(pair) => bool_value(&pair.value).map(Some),
                Meta::List(list) => Err(syn::Error::new_spanned(
                    list,
                    format!("write `{key}` or `{key} = false`"),
                )),
            }
        };
        let text = |meta: &Meta| -> syn::Result<Option<String>> {
            match meta {
                Meta::NameValue(pair) => string_value(&pair.value).map(Some),
                other => Err(syn::Error::new_spanned(
                    other,
                    format!("write `{key} = \"...\"`"),
                )),
            }
        };
        match key.as_str() {
            "name" => out.name = text(&meta)?,
            "description" => out.description = text(&meta)?,
            "title" => out.title = text(&meta)?,
            "read_only" => out.read_only = hint(&meta)?,
            "destructive" => out.destructive = hint(&meta)?,
            "idempotent" => out.idempotent = hint(&meta)?,
            "open_world" => out.open_world = hint(&meta)?,
            other => {
                return Err(syn::Error::new_spanned(
                    path,
                    format!("unknown #[tool] argument `{other}`; expected {KNOWN}"),
                ));
            }
        }
    }
    Ok(out)
}

/// The doc comment as the model should read it: lines of a paragraph
/// joined by spaces, paragraphs by a blank line.
fn doc_comment(function: &ItemFn) -> Option<String> {
    let mut lines = Vec::new();
    for attribute in &function.attrs {
        if !attribute.path().is_ident("doc") {
            continue;
        }
        if let Meta::NameValue(pair) = &attribute.meta
            && let Ok(line) = string_value(&pair.value)
        {
            lines.push(line.trim().to_owned());
        }
    }
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in lines {
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
        } else {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(&line);
        }
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    (!paragraphs.is_empty()).then(|| paragraphs.join("\n\n"))
}

fn option(value: Option<bool>) -> proc_macro2::TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

fn expand(
    metas: Punctuated<Meta, Token![,]>,
    function: ItemFn,
) -> syn::Result<proc_macro2::TokenStream> {
    let arguments = parse_arguments(metas)?;
    let signature = &function.sig;
    if let Some(asyncness) = &signature.asyncness {
        return Err(syn::Error::new_spanned(
            asyncness,
            "a plugin tool is a plain function: calls run on one of the host's blocking threads (a plugin that needs async I/O runs its own small runtime)",
        ));
    }
    if !signature.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &signature.generics,
            "a plugin tool cannot be generic: its schema is derived from concrete types",
        ));
    }
    if let Some(FnArg::Receiver(receiver)) = signature.inputs.first() {
        return Err(syn::Error::new_spanned(
            receiver,
            "a plugin tool is a free function, not a method",
        ));
    }
    if signature.inputs.len() > 1 {
        return Err(syn::Error::new_spanned(
            &signature.inputs,
            "a plugin tool takes one argument, a struct deriving Deserialize and JsonSchema (or none)",
        ));
    }
    let ident = &signature.ident;
    let name = arguments.name.unwrap_or_else(|| ident.to_string());
    let Some(description) = arguments.description.or_else(|| doc_comment(&function)) else {
        return Err(syn::Error::new(
            Span::call_site(),
            format!(
                "tool `{name}` has no description: write a doc comment on the function or #[tool(description = \"...\")]"
            ),
        ));
    };
    let handler = if signature.inputs.is_empty() {
        quote!(|_: ::quiver_plugin_api::typed::NoArguments| super::#ident())
    } else {
        quote!(super::#ident)
    };
    let title = arguments
        .title
        .map(|title| quote!(.title(#title)))
        .unwrap_or_default();
    let read_only = option(arguments.read_only);
    let destructive = option(arguments.destructive);
    let idempotent = option(arguments.idempotent);
    let open_world = option(arguments.open_world);
    Ok(quote! {
        #function

        #[doc(hidden)]
        #[allow(non_snake_case)]
        pub(crate) mod #ident {
            /// The typed tool built from the function of the same name.
            pub(crate) fn __quiver_tool() -> ::quiver_plugin_api::typed::TypedTool {
                ::quiver_plugin_api::typed::TypedTool::new(#name, #description, #handler)
                    #title
                    .hints(::quiver_plugin_api::ToolHints {
                        read_only: #read_only,
                        destructive: #destructive,
                        idempotent: #idempotent,
                        open_world: #open_world,
                    })
            }
        }
    })
}
