//! Which documents have a compiled form, and that form: a session list, read from a
//! document async-graphql has already parsed (and, before the plan is kept, validated and
//! answered without an error), planned against the schema ([`super::schema`]) with the
//! fields the compiled list knows ([`super::fields`]).
//!
//! What compiles, and nothing else (anything else is answered by the executor):
//! - a document of one operation, a query without directives, whose only root selection is
//!   `sessions(...)`, aliased or not;
//! - its arguments as written, with variables for `projectId`, `scope`, `first`, `after`,
//!   `last` and `before` (their values are coerced as the executor coerces them); `filter`
//!   and `orderBy` only as literals, which validation has checked once and for all;
//! - below it, any field of any object the fields module knows (the connection, edges,
//!   page info, sessions and their relations: owner, project, resource group, image,
//!   launch group, requested and occupied slots with accelerators), `__typename`
//!   anywhere, and aliases;
//! - no fragments, no directives, no response key selected twice (the executor merges
//!   those), no arguments below the root.

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field as QueryField, OperationType, Selection, SelectionSet,
    VariableDefinition,
};
use async_graphql::{Name, Positioned};
/// A value as written in the document: variables not yet replaced.
use async_graphql_value::Value;

use crate::domain::paging::MAX_PAGE_SIZE;

use super::super::limits;
use super::super::session_paging::page_complexity;
use super::fields::{self, Get};
use super::schema::{self, Types};
use crate::domain::related::Wanted;

/// A compiled session list.
pub struct Plan {
    /// The root field's response key, as JSON with its colon.
    pub(super) key: Vec<u8>,
    pub(super) variables: Vec<Positioned<VariableDefinition>>,
    pub(super) arguments: Vec<(Positioned<Name>, Positioned<Value>)>,
    /// The connection's selection.
    pub(super) root: Object,
    /// The relations to load for the page.
    pub(super) loads: Wanted,
}

/// The selection of one object: each field's response key (written as JSON, with its
/// colon) and what it is.
pub(super) struct Object {
    pub(super) fields: Vec<(Vec<u8>, Field)>,
}

pub(super) enum Field {
    /// `__typename`: the type's name, written as JSON.
    Typename(Vec<u8>),
    /// A field read by `get`; `object` is its selection when its type is an object.
    Get { get: Get, nullable: bool, list: bool, object: Option<Object> },
}

/// The arguments a variable may stand for: those whose values the executor's coercion and
/// ours agree on by construction (scalars and an enum).
const VARIABLE_ARGUMENTS: [&str; 6] = ["projectId", "scope", "first", "after", "last", "before"];
/// The other arguments, compiled only as literals.
const LITERAL_ARGUMENTS: [&str; 2] = ["filter", "orderBy"];

impl Plan {
    /// The compiled form of the operation `operation_name` of `document`, if it has one
    /// whose cost stays under `max_cost` whatever its variables say.
    pub fn of(document: &ExecutableDocument, operation_name: Option<&str>, max_cost: usize) -> Option<Plan> {
        if !document.fragments.is_empty() {
            return None;
        }
        // One operation only: validation weighs the cost of every operation of a document,
        // the ones not run included, reading their arguments with the request's variables.
        if matches!(&document.operations, DocumentOperations::Multiple(ops) if ops.len() != 1) {
            return None;
        }
        let operation = limits::selected(document, operation_name)?;
        if operation.ty != OperationType::Query || !operation.directives.is_empty() {
            return None;
        }
        let [root] = operation.selection_set.node.items.as_slice() else { return None };
        let Selection::Field(root) = &root.node else { return None };
        let root = &root.node;
        if root.name.node != "sessions" || !root.directives.is_empty() {
            return None;
        }
        for (name, value) in &root.arguments {
            let name = name.node.as_str();
            let literal_only = LITERAL_ARGUMENTS.contains(&name);
            if !literal_only && !VARIABLE_ARGUMENTS.contains(&name) {
                return None;
            }
            if literal_only && has_variable(&value.node) {
                return None;
            }
        }
        let types = schema::types();
        let connection = types.field("Query", "sessions")?;
        let mut loads = Wanted::default();
        let object = object(types, &connection.named, &root.selection_set.node, &mut loads)?;
        let plan = Plan {
            key: key_of(root),
            variables: operation.variable_definitions.clone(),
            arguments: root.arguments.clone(),
            root: object,
            loads,
        };
        // The cost async-graphql gives the page at its largest size: each field below the
        // list costs at most 1 per session.
        let per_session = count(&root.selection_set.node);
        let largest = i32::try_from(MAX_PAGE_SIZE).unwrap_or(i32::MAX);
        (page_complexity(Some(largest), per_session).saturating_add(1) <= max_cost).then_some(plan)
    }
}

fn has_variable(value: &Value) -> bool {
    match value {
        Value::Variable(_) => true,
        Value::List(items) => items.iter().any(has_variable),
        Value::Object(fields) => fields.values().any(has_variable),
        _ => false,
    }
}

/// Every field in `set`, at any depth.
fn count(set: &SelectionSet) -> usize {
    set.items
        .iter()
        .map(|item| match &item.node {
            Selection::Field(f) => 1 + count(&f.node.selection_set.node),
            _ => usize::MAX / 4,
        })
        .fold(0, usize::saturating_add)
}

fn key_of(field: &QueryField) -> Vec<u8> {
    let mut key = serde_json::to_vec(field.response_key().node.as_str()).unwrap_or_default();
    key.push(b':');
    key
}

/// The selection `set` of an object of the type `type_name`: each field as the schema types
/// it and the fields module reads it (`None`: something is not compiled). Plain fields
/// only, each response key once.
fn object(types: &Types, type_name: &str, set: &SelectionSet, loads: &mut Wanted) -> Option<Object> {
    let mut compiled: Vec<(Vec<u8>, Field)> = Vec::with_capacity(set.items.len());
    for item in &set.items {
        let Selection::Field(f) = &item.node else { return None };
        let f = &f.node;
        if !f.directives.is_empty() || !f.arguments.is_empty() {
            return None;
        }
        let key = key_of(f);
        if compiled.iter().any(|(k, _)| *k == key) {
            return None;
        }
        let name = f.name.node.as_str();
        let sub = &f.selection_set.node;
        let field = if name == "__typename" {
            if !sub.items.is_empty() {
                return None;
            }
            Field::Typename(serde_json::to_vec(type_name).ok()?)
        } else {
            let ty = types.field(type_name, name)?;
            if ty.takes_arguments {
                return None;
            }
            let get = fields::getter(type_name, name)?;
            let object = if types.is_object(&ty.named) {
                if sub.items.is_empty() {
                    return None;
                }
                Some(object(types, &ty.named, sub, loads)?)
            } else if sub.items.is_empty() {
                None
            } else {
                return None;
            };
            fields::needs(loads, type_name, name);
            Field::Get { get, nullable: ty.nullable, list: ty.list, object }
        };
        compiled.push((key, field));
    }
    Some(Object { fields: compiled })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(query: &str) -> Option<Plan> {
        let doc = async_graphql::parser::parse_query(query).expect("parses");
        Plan::of(&doc, None, 100_000)
    }

    #[test]
    fn plain_lists_compile() {
        assert!(plan("query($p: ID!) { sessions(projectId: $p, first: 50) { edges { cursor node { id name owner { email } requestedSlots { cpu memory } } } pageInfo { hasNextPage endCursor } } }").is_some());
        assert!(plan("{ s: sessions(projectId: \"x\", filter: {tab: RUNNING}, orderBy: [{field: NAME, direction: ASC}]) { __typename nodes { __typename t: type } } }").is_some());
        // Every column of the Sessions page, relations included.
        assert!(plan("{ sessions(projectId: \"x\") { nodes { name status type owner { email } project { name } resourceGroup { name } image { name } launchGroup { id name } requestedSlots { cpu memory accelerators { slot amount } } occupiedSlots { all { slot amount } } createdAt elapsedSeconds } } }").is_some());
    }

    #[test]
    fn anything_else_is_left_to_the_executor() {
        for query in [
            // Another root field beside it, or another root.
            "{ sessions(projectId: \"x\") { nodes { id } } viewer { user { email } } }",
            "{ session(id: \"x\") { id } }",
            // Variables inside the literal-only arguments.
            "query($t: SessionTab) { sessions(projectId: \"x\", filter: {tab: $t}) { nodes { id } } }",
            "query($o: [SessionOrder!]) { sessions(projectId: \"x\", orderBy: $o) { nodes { id } } }",
            // Fragments, directives, a key twice, arguments below the root.
            "{ sessions(projectId: \"x\") { nodes { ...F } } } fragment F on Session { id }",
            "{ sessions(projectId: \"x\") { nodes { ... on Session { id } } } }",
            "query($b: Boolean!) { sessions(projectId: \"x\") { nodes { id @include(if: $b) } } }",
            "{ sessions(projectId: \"x\") { nodes { id id } } }",
            "{ sessions(projectId: \"x\") { nodes { a: id a: name } } }",
            "{ sessions(projectId: \"x\") { nodes { logs(tail: 5) } } }",
            // Fields that need a loader or a statement of their own.
            "{ sessions(projectId: \"x\") { totalCount } }",
            "{ sessions(projectId: \"x\") { nodes { launchGroup { sessions { nodes { id } } } } } }",
            "{ sessions(projectId: \"x\") { nodes { schedulingHistory { edges { cursor } } } } }",
            "mutation { sessions(projectId: \"x\") { nodes { id } } }",
            // Two operations: validation weighs both.
            "query A { sessions(projectId: \"x\") { nodes { id } } } query B { sessions(projectId: \"y\") { nodes { id } } }",
        ] {
            assert!(plan(query).is_none(), "{query}");
        }
    }

    #[test]
    fn the_operation_is_picked_as_the_executor_picks_it() {
        let named = async_graphql::parser::parse_query("query A { sessions(projectId: \"x\") { nodes { id } } }")
            .expect("parses");
        assert!(Plan::of(&named, Some("A"), 100_000).is_some());
        assert!(Plan::of(&named, None, 100_000).is_some());
        assert!(Plan::of(&named, Some("B"), 100_000).is_none());
        let anonymous =
            async_graphql::parser::parse_query("{ sessions(projectId: \"x\") { nodes { id } } }").expect("parses");
        assert!(Plan::of(&anonymous, Some("A"), 100_000).is_none());
    }

    #[test]
    fn a_page_that_could_cost_over_the_budget_does_not_compile() {
        let doc =
            async_graphql::parser::parse_query("{ sessions(projectId: \"x\") { nodes { id name } } }").expect("parses");
        let cost = page_complexity(Some(MAX_PAGE_SIZE as i32), 3) + 1;
        assert!(Plan::of(&doc, None, cost).is_some());
        assert!(Plan::of(&doc, None, cost - 1).is_none());
    }
}
