//! Bounds on what a query document can make the server do, checked right after parsing and
//! before async-graphql validates it. Validation (and the depth and complexity limits)
//! walks every fragment spread as if it were written out: a kilobyte of fragments that each
//! spread the previous one twice expands to millions of fields, all walked inside one poll
//! of the request's future. Here the expanded size is counted in time linear in the
//! document (each fragment's size once), and a document over the bound is refused with
//! `LIMIT_EXCEEDED` before any of that work starts.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextParseQuery};
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{ErrorExtensionValues, Name, ServerError, ServerResult, Variables};

use super::errors::LIMIT_EXCEEDED;

/// The most fields a document may select once every fragment spread is written out, over
/// all its operations and fragments. The largest query the page makes selects a few hundred.
pub const MAX_EXPANDED_FIELDS: usize = 10_000;

/// How deep fragment spreads may nest within one another.
pub const MAX_SPREAD_NESTING: usize = 32;

/// The schema extension that applies [`check`] to every document, over HTTP and WebSocket.
pub struct DocumentLimits;

impl ExtensionFactory for DocumentLimits {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(DocumentLimitsExtension)
    }
}

struct DocumentLimitsExtension;

#[async_graphql::async_trait::async_trait]
impl Extension for DocumentLimitsExtension {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next.run(ctx, query, variables).await?;
        check(&document)?;
        Ok(document)
    }
}

/// Refuses a document whose expanded size or spread nesting is over the bounds.
pub fn check(document: &ExecutableDocument) -> ServerResult<()> {
    let mut counter = Counter { document, sizes: HashMap::new() };
    let mut total = 0usize;
    for (_, operation) in document.operations.iter() {
        total = total.saturating_add(counter.selections(&operation.node.selection_set.node, 0)?);
    }
    for name in document.fragments.keys() {
        total = total.saturating_add(counter.fragment(name, 0)?);
    }
    if total > MAX_EXPANDED_FIELDS {
        return Err(refusal(format!(
            "the query selects too many fields once its fragments are expanded (over {MAX_EXPANDED_FIELDS})"
        )));
    }
    Ok(())
}

struct Counter<'a> {
    document: &'a ExecutableDocument,
    /// Each fragment's expanded size; `None` while it is being counted (a cycle, which
    /// validation reports).
    sizes: HashMap<&'a Name, Option<usize>>,
}

impl<'a> Counter<'a> {
    fn selections(&mut self, set: &'a SelectionSet, nesting: usize) -> ServerResult<usize> {
        let mut n = 0usize;
        for item in &set.items {
            let size = match &item.node {
                Selection::Field(field) => {
                    1usize.saturating_add(self.selections(&field.node.selection_set.node, nesting)?)
                }
                Selection::InlineFragment(inline) => self.selections(&inline.node.selection_set.node, nesting)?,
                Selection::FragmentSpread(spread) => self.fragment(&spread.node.fragment_name.node, nesting + 1)?,
            };
            n = n.saturating_add(size);
            if n > MAX_EXPANDED_FIELDS {
                // Over the bound already: no need to count the rest.
                return Ok(n);
            }
        }
        Ok(n)
    }

    fn fragment(&mut self, name: &'a Name, nesting: usize) -> ServerResult<usize> {
        if nesting > MAX_SPREAD_NESTING {
            return Err(refusal(format!("fragment spreads are nested too deep (over {MAX_SPREAD_NESTING})")));
        }
        match self.sizes.get(name) {
            Some(Some(size)) => return Ok(*size),
            Some(None) => return Ok(0), // a cycle: validation refuses it
            None => {}
        }
        // An unknown fragment counts nothing here; validation refuses it.
        let Some(definition) = self.document.fragments.get(name) else { return Ok(0) };
        self.sizes.insert(name, None);
        let size = self.selections(&definition.node.selection_set.node, nesting)?;
        self.sizes.insert(name, Some(size));
        Ok(size)
    }
}

fn refusal(message: String) -> ServerError {
    let mut error = ServerError::new(message, None);
    let mut extensions = ErrorExtensionValues::default();
    extensions.set("code", LIMIT_EXCEEDED);
    error.extensions = Some(extensions);
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doubling(n: usize) -> String {
        let mut q = format!("{{ viewer {{ user {{ ...F{n} }} }} }}\nfragment F0 on User {{ email }}\n");
        for i in 1..=n {
            q.push_str(&format!("fragment F{i} on User {{ ...F{} ...F{} }}\n", i - 1, i - 1));
        }
        q
    }

    fn checked(query: &str) -> ServerResult<()> {
        check(&async_graphql::parser::parse_query(query).expect("parses"))
    }

    #[test]
    fn doubling_fragments_are_counted_once_each_and_refused() {
        assert!(checked(&doubling(5)).is_ok(), "2^5 fields is a fine query");
        let err = checked(&doubling(30)).expect_err("2^30 fields");
        assert!(err.message.contains("too many fields"), "{}", err.message);
    }

    #[test]
    fn deep_spread_chains_and_cycles_end() {
        let mut q = String::from("{ viewer { user { ...F500 } } }\nfragment F0 on User { email }\n");
        for i in 1..=500 {
            q.push_str(&format!("fragment F{i} on User {{ ...F{} }}\n", i - 1));
        }
        assert!(checked(&q).expect_err("nested 500 deep").message.contains("nested too deep"));
        let cycle = "{ viewer { user { ...A } } } fragment A on User { ...B } fragment B on User { ...A email }";
        assert!(checked(cycle).is_ok(), "a cycle is left to validation, which names it");
    }

    #[test]
    fn aliases_and_inline_fragments_count() {
        let aliases: String = (0..MAX_EXPANDED_FIELDS + 1).map(|i| format!("a{i}: viewer {{ __typename }} ")).collect();
        assert!(checked(&format!("{{ {aliases} }}")).is_err());
        let inline = "{ viewer { ... on Viewer { user { email } } } }";
        assert!(checked(inline).is_ok());
    }
}
