//! `#[derive(Tool)]`: makes an argument struct (`Deserialize + JsonSchema`) a tool.
//!
//! The spec comes from the struct: the name from `#[tool(name = "...")]` or the
//! snake-cased type name, the description from the doc comment or
//! `#[tool(description = "...")]`, the input schema from schemars (with
//! `additionalProperties: false`), the flags `idempotent`, `needs_approval` and
//! `timeout_secs = N`, and the texts `output = "..."` and `errors = "..."` that
//! describe a result and what can go wrong. The handler is an inherent method the
//! user writes:
//!
//! ```ignore
//! impl MyArgs {
//!     async fn run(self, ctx: &ToolContext) -> Result<impl Into<ToolOutput>, impl Into<ToolError>> { … }
//! }
//! ```
//!
//! A tool that needs state shared by its calls (a client, an allowlist) names its
//! type with `#[tool(state = MyState)]`; `run` then takes it as a third argument
//! (`state: &MyState`), and the tool is built with `Typed::with_state`.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::{
    Attribute, Data, DeriveInput, Expr, ExprLit, Fields, Lit, LitStr, Meta, parse_macro_input,
};

/// Derives `TypedTool` for an argument struct; see the crate documentation.
#[proc_macro_derive(Tool, attributes(tool))]
pub fn derive_tool(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// What `#[tool(...)]` attributes say.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    description: Option<LitStr>,
    idempotent: bool,
    needs_approval: bool,
    timeout_secs: Option<f64>,
    tools_path: Option<syn::Path>,
    state: Option<syn::Type>,
    output: Option<LitStr>,
    errors: Option<LitStr>,
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let ident = &input.ident;
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(_) => {}
            _ => {
                return Err(syn::Error::new_spanned(
                    ident,
                    "#[derive(Tool)] needs a struct with named fields, one per argument; for a tool without arguments write `struct Name {}`",
                ));
            }
        },
        Data::Enum(_) | Data::Union(_) => {
            return Err(syn::Error::new_spanned(
                ident,
                "#[derive(Tool)] works on structs: a tool's arguments are one JSON object, so describe them as a struct with named fields",
            ));
        }
    }
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "#[derive(Tool)] does not support generic structs: a tool has one fixed schema",
        ));
    }
    let options = options(&input.attrs)?;
    let name = options
        .name
        .as_ref()
        .map_or_else(|| snake_case(&ident.to_string()), LitStr::value);
    check_name(
        &name,
        options.name.as_ref().map_or(ident.span(), LitStr::span),
    )?;
    let description = match (&options.description, doc_comment(&input.attrs)) {
        (Some(description), _) => description.value(),
        (None, Some(doc)) => doc,
        (None, None) => {
            return Err(syn::Error::new_spanned(
                ident,
                "a tool needs a description for the model: add a doc comment (`/// What it does.`) or #[tool(description = \"...\")]",
            ));
        }
    };
    let tools = options
        .tools_path
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::agent::tools));
    let idempotent = options.idempotent;
    let needs_approval = options.needs_approval;
    let timeout = options.timeout_secs.map(|secs| {
        quote! {
            fn timeout() -> #tools::__private::Option<#tools::__private::Duration> {
                #tools::__private::Option::Some(#tools::__private::Duration::from_secs_f64(#secs))
            }
        }
    });
    let text = |text: &Option<LitStr>| match text {
        Some(text) => quote! {
            #tools::__private::Option::Some(::std::string::String::from(#text))
        },
        None => quote! { #tools::__private::Option::None },
    };
    let output = text(&options.output);
    let errors = text(&options.errors);
    let (state_type, state_param, run) = match &options.state {
        Some(state) => (
            quote! { #state },
            quote! { state },
            quote! { Self::run(self, ctx, state) },
        ),
        None => (
            quote! { () },
            quote! { _state },
            quote! { Self::run(self, ctx) },
        ),
    };
    Ok(quote! {
        impl #tools::TypedTool for #ident {
            type State = #state_type;

            fn spec() -> #tools::__private::ToolSpec {
                #tools::__private::ToolSpec {
                    name: ::std::string::String::from(#name),
                    description: ::std::string::String::from(#description),
                    input_schema: #tools::input_schema_for::<Self>(),
                    output_description: #output,
                    error_description: #errors,
                    idempotent: #idempotent,
                    needs_approval: #needs_approval,
                }
            }

            #timeout

            fn invoke<'a>(
                self,
                ctx: &'a #tools::__private::ToolContext,
                #state_param: &'a Self::State,
            ) -> #tools::ToolFuture<'a> {
                #tools::__private::Box::pin(async move {
                    match #run.await {
                        ::std::result::Result::Ok(output) => ::std::result::Result::Ok(
                            ::std::convert::Into::<#tools::__private::ToolOutput>::into(output),
                        ),
                        ::std::result::Result::Err(error) => ::std::result::Result::Err(
                            ::std::convert::Into::<#tools::__private::ToolError>::into(error),
                        ),
                    }
                })
            }
        }
    })
}

fn options(attrs: &[Attribute]) -> syn::Result<Options> {
    let mut options = Options::default();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("tool")) {
        attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            match key.as_str() {
                "name" => options.name = Some(meta.value()?.parse()?),
                "description" => options.description = Some(meta.value()?.parse()?),
                "idempotent" => options.idempotent = flag(&meta)?,
                "needs_approval" => options.needs_approval = flag(&meta)?,
                "timeout_secs" => {
                    let lit: Lit = meta.value()?.parse()?;
                    let secs = match &lit {
                        Lit::Int(int) => int.base10_parse::<f64>()?,
                        Lit::Float(float) => float.base10_parse::<f64>()?,
                        _ => return Err(syn::Error::new_spanned(lit, "timeout_secs takes a number of seconds")),
                    };
                    if !(secs.is_finite() && secs > 0.0) {
                        return Err(syn::Error::new_spanned(lit, "timeout_secs must be a positive number"));
                    }
                    options.timeout_secs = Some(secs);
                }
                "crate" => {
                    let path: LitStr = meta.value()?.parse()?;
                    options.tools_path = Some(path.parse()?);
                }
                "state" => options.state = Some(meta.value()?.parse()?),
                "output" => options.output = Some(meta.value()?.parse()?),
                "errors" => options.errors = Some(meta.value()?.parse()?),
                _ => {
                    return Err(meta.error(format!(
                        "unknown #[tool] attribute `{key}`; expected one of: name, description, idempotent, needs_approval, timeout_secs, state, output, errors, crate"
                    )));
                }
            }
            Ok(())
        })?;
    }
    Ok(options)
}

/// `idempotent` alone, or `idempotent = true|false`.
fn flag(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<bool> {
    if meta.input.peek(syn::Token![=]) {
        let value: syn::LitBool = meta.value()?.parse()?;
        Ok(value.value)
    } else {
        Ok(true)
    }
}

fn doc_comment(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(pair) => match &pair.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| {
            line.strip_prefix(' ')
                .unwrap_or(&line)
                .trim_end()
                .to_owned()
        })
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn snake_case(name: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (index, c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let previous = index.checked_sub(1).and_then(|before| chars.get(before));
            let after_lower = previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit());
            let before_lower = chars.get(index + 1).is_some_and(|next| next.is_lowercase());
            let after_upper = previous.is_some_and(|p| p.is_uppercase());
            if after_lower || (before_lower && after_upper) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(*c);
        }
    }
    out
}

fn check_name(name: &str, span: Span) -> syn::Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(syn::Error::new(
            span,
            format!(
                "tool name `{name}` must be 1 to 64 letters, digits, `_` or `-`, as model providers require"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn type_names_become_snake_case() {
        assert_eq!(snake_case("Add"), "add");
        assert_eq!(snake_case("ReadFile"), "read_file");
        assert_eq!(snake_case("HTTPGet"), "http_get");
        assert_eq!(snake_case("Sha256Sum"), "sha256_sum");
    }
}
