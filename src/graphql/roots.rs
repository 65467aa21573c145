//! The roots of an answer as GraphQL has them: the root fields of an operation in the
//! document's order, as the executor collects them ([`of`]), and the executor's answer put
//! in that order, with GraphQL's rule for a root field that failed ([`settle`]).

use async_graphql::parser::types::{ExecutableDocument, OperationType, Selection, SelectionSet};
use async_graphql::{Name, Positioned, ServerError};

use super::limits::Operation;

/// A root field of an operation: the key its answer has (its alias or name) and the field.
#[derive(Clone, Debug, PartialEq)]
pub struct RootField {
    pub key: String,
    pub field: String,
}

/// The fields of a root selection set, in order, as the executor collects them: entering
/// fragments (each once: a cycle, refused by [`check`], ends here too), leaving out what
/// `@skip`/`@include` leave out, each key once, in time linear in the document.
struct RootWalk<'d> {
    variables: &'d async_graphql::Variables,
    entered: std::collections::HashSet<&'d Name>,
    keys: std::collections::HashSet<&'d str>,
    roots: Vec<RootField>,
}

impl<'d> RootWalk<'d> {
    fn fields(&mut self, document: &'d ExecutableDocument, set: &'d SelectionSet) {
        for item in &set.items {
            let directives = match &item.node {
                Selection::Field(f) => &f.node.directives,
                Selection::InlineFragment(i) => &i.node.directives,
                Selection::FragmentSpread(s) => &s.node.directives,
            };
            if !self.included(directives) {
                continue;
            }
            match &item.node {
                Selection::Field(f) => {
                    let f = &f.node;
                    let key = f.alias.as_ref().unwrap_or(&f.name).node.as_str();
                    if self.keys.insert(key) {
                        self.roots.push(RootField { key: key.to_owned(), field: f.name.node.to_string() });
                    }
                }
                Selection::InlineFragment(i) => self.fields(document, &i.node.selection_set.node),
                Selection::FragmentSpread(s) => {
                    let name = &s.node.fragment_name.node;
                    if self.entered.insert(name)
                        && let Some(fragment) = document.fragments.get(name)
                    {
                        self.fields(document, &fragment.node.selection_set.node);
                    }
                }
            }
        }
    }

    /// Whether `@skip`/`@include` keep a selection, as the executor reads them (a value it
    /// cannot read counts as kept: the executor then reports it).
    fn included(&self, directives: &[Positioned<async_graphql::parser::types::Directive>]) -> bool {
        directives.iter().all(|d| {
            let condition = d.node.arguments.iter().find(|(name, _)| name.node == "if").and_then(|(_, v)| {
                match v.node.clone().into_const_with(|name| self.variables.get(&name).cloned().ok_or(())) {
                    Ok(async_graphql::Value::Boolean(b)) => Some(b),
                    _ => None,
                }
            });
            match (d.node.name.node.as_str(), condition) {
                ("skip", Some(skip)) => !skip,
                ("include", Some(include)) => include,
                _ => true,
            }
        })
    }
}

/// The executor's answer made what GraphQL asks of it, at its root: the keys in the
/// document's order (async-graphql writes root fields in the order they finish, so two
/// identical requests could differ), and a root field whose resolver failed present as
/// null when its type allows, else no data at all (the executor leaves its key out).
pub fn settle(data: &mut async_graphql::Value, operation: &Operation, errors: &[ServerError]) {
    // The executor answers null when no root field gave a value: each that failed is then
    // settled as any other, and with none (all skipped) the answer is an empty object.
    let ran = errors.is_empty() || errors.iter().any(|e| !e.path.is_empty());
    if *data == async_graphql::Value::Null && ran {
        *data = async_graphql::Value::Object(Default::default());
    }
    let async_graphql::Value::Object(answered) = data else { return };
    let object = match operation.ty {
        OperationType::Query => "Query",
        OperationType::Mutation => "Mutation",
        OperationType::Subscription => "Subscription",
    };
    let failed = |key: &str| {
        errors.iter().any(|e| matches!(e.path.first(), Some(async_graphql::PathSegment::Field(k)) if k == key))
    };
    let mut ordered = async_graphql::indexmap::IndexMap::with_capacity(answered.len());
    for root in &operation.roots {
        let key = Name::new(&root.key);
        if let Some(value) = answered.shift_remove(&key) {
            ordered.insert(key, value);
        } else if failed(&root.key) {
            if super::compiled::nullable(object, &root.field) {
                ordered.insert(key, async_graphql::Value::Null);
            } else {
                *data = async_graphql::Value::Null;
                return;
            }
        }
    }
    ordered.extend(answered.drain(..));
    *answered = ordered;
}

/// The root fields of the selection set `set` of `document`, in order, each key once.
pub fn of(document: &ExecutableDocument, set: &SelectionSet, variables: &async_graphql::Variables) -> Vec<RootField> {
    let mut walk = RootWalk { variables, entered: Default::default(), keys: Default::default(), roots: Vec::new() };
    walk.fields(document, set);
    walk.roots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graphql::limits::operation;

    #[test]
    fn roots_settle_in_the_documents_order_and_failures_as_graphql_says() {
        let doc = async_graphql::parser::parse_query(
            "query { n: node(id: \"x\") { id } ...F s: sessions(projectId: \"p\") { totalCount } } \
             fragment F on Query { viewer { user { email } } }",
        )
        .expect("parses");
        let op = operation(&doc, None, &Default::default()).expect("one operation");
        let keys: Vec<&str> = op.roots.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["n", "viewer", "s"]);
        // What `@skip`/`@include` leave out is not where a key first stands.
        let skipped = async_graphql::parser::parse_query(
            "query($no: Boolean!) { s: viewer @include(if: $no) { id } n: node(id: \"x\") { id } \
             s: viewer @skip(if: false) { id } v: viewer @skip(if: true) { id } }",
        )
        .expect("parses");
        let variables = async_graphql::Variables::from_json(serde_json::json!({"no": false}));
        let walked = operation(&skipped, None, &variables).expect("one operation");
        let keys: Vec<&str> = walked.roots.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["n", "s"]);
        let failed = |key: &str| {
            let mut e = ServerError::new("failed", None);
            e.path = vec![async_graphql::PathSegment::Field(key.to_owned())];
            e
        };
        let object = |pairs: &[(&str, async_graphql::Value)]| {
            async_graphql::Value::Object(pairs.iter().map(|(k, v)| (Name::new(k), v.clone())).collect())
        };
        let one = async_graphql::Value::from(1);
        // Finished in another order: put back in the document's.
        let mut data = object(&[("s", one.clone()), ("viewer", one.clone()), ("n", one.clone())]);
        settle(&mut data, &op, &[]);
        assert_eq!(data, object(&[("n", one.clone()), ("viewer", one.clone()), ("s", one.clone())]));
        // `node` may be null: it is, beside its error.
        let mut data = object(&[("s", one.clone()), ("viewer", one.clone())]);
        settle(&mut data, &op, &[failed("n")]);
        assert_eq!(data, object(&[("n", async_graphql::Value::Null), ("viewer", one.clone()), ("s", one.clone())]));
        // `sessions` may not: no data at all.
        let mut data = object(&[("n", one.clone()), ("viewer", one.clone())]);
        settle(&mut data, &op, &[failed("s")]);
        assert_eq!(data, async_graphql::Value::Null);
        // Every root failed: the executor answered null; those that may be null are.
        let lone = async_graphql::parser::parse_query("{ node(id: \"x\") { id } }").expect("parses");
        let lone = operation(&lone, None, &Default::default()).expect("one operation");
        let mut data = async_graphql::Value::Null;
        settle(&mut data, &lone, &[failed("node")]);
        assert_eq!(data, object(&[("node", async_graphql::Value::Null)]));
        // Every root skipped: an empty answer.
        let none = async_graphql::parser::parse_query("{ viewer @skip(if: true) { id } }").expect("parses");
        let none = operation(&none, None, &Default::default()).expect("one operation");
        assert!(none.roots.is_empty());
        let mut data = async_graphql::Value::Null;
        settle(&mut data, &none, &[]);
        assert_eq!(data, object(&[]));
        // Nothing ran (no error at a path): still no data.
        let mut data = async_graphql::Value::Null;
        settle(&mut data, &lone, &[ServerError::new("refused", None)]);
        assert_eq!(data, async_graphql::Value::Null);
    }
}
