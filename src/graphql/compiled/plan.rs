//! Which documents have a compiled form, and that form: a session list (and the counts of
//! its tabs), read from a document async-graphql has already parsed (and, before the plan
//! is kept, validated and answered without an error), planned against the schema
//! ([`super::schema`]) with the fields the compiled list knows ([`super::fields`]).
//!
//! What compiles, and nothing else (anything else is answered by the executor):
//! - a document of one operation, a query without directives, whose root selections are
//!   `sessions(...)` and at most one `sessionCounts(...)` beside it (the Sessions page's
//!   `SessionsPage`), aliased or not;
//! - their arguments as written or as variables (coerced as the executor coerces them);
//! - below them, any field of any object the fields module knows (the connection, edges,
//!   page info, sessions and their relations: owner, project, resource group, image,
//!   launch group, requested and occupied slots with accelerators, pending reasons, who
//!   made the latest status change; the counts), `__typename` anywhere, and aliases;
//! - no fragments, no directives, no response key selected twice (the executor merges
//!   those), no arguments below the roots.

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field as QueryField, OperationType, Selection, SelectionSet,
    VariableDefinition,
};
use async_graphql::{Name, Positioned};
/// A value as written in the document: variables not yet replaced.
use async_graphql_value::Value;

use crate::domain::store::paging::MAX_PAGE_SIZE;

use super::super::limits::{self, AGGREGATE_COST};
use super::super::session_paging::page_complexity;
use super::fields::{self, Get};
use super::schema::{self, Types};
use crate::domain::sessions::related::Wanted;

/// A compiled session list, and the counts beside it.
pub struct Plan {
    pub(super) variables: Vec<Positioned<VariableDefinition>>,
    /// The root fields, in the document's order.
    pub(super) roots: Vec<Root>,
    /// The relations to load for the page.
    pub(super) loads: Wanted,
}

/// One root field: its response key (written as JSON, with its colon), what it is, its
/// arguments as written, and its selection.
pub(super) struct Root {
    pub(super) key: Vec<u8>,
    pub(super) kind: RootKind,
    pub(super) arguments: Vec<(Positioned<Name>, Positioned<Value>)>,
    pub(super) selection: Object,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RootKind {
    /// `sessions`: a page of the list.
    Sessions,
    /// `sessionCounts`: the counts of its tabs and types.
    Counts,
}

impl RootKind {
    fn of(field: &str) -> Option<RootKind> {
        match field {
            "sessions" => Some(RootKind::Sessions),
            "sessionCounts" => Some(RootKind::Counts),
            _ => None,
        }
    }

    /// The arguments it takes.
    fn arguments(self) -> &'static [&'static str] {
        match self {
            RootKind::Sessions => &["projectId", "scope", "filter", "orderBy", "first", "after", "last", "before"],
            RootKind::Counts => &["projectId", "scope", "filter"],
        }
    }
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

/// The budgets the executor would hold a document to: its cost, and how many counts it
/// may run (a document whose counts the executor would refuse is left to it).
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub max_cost: usize,
    pub counts_allowed: bool,
}

impl Plan {
    /// The compiled form of the operation `operation_name` of `document`, if it has one
    /// that stays within `budget` whatever its variables say.
    pub fn of(document: &ExecutableDocument, operation_name: Option<&str>, budget: Budget) -> Option<Plan> {
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
        let types = schema::types();
        let mut loads = Wanted::default();
        let mut roots: Vec<Root> = Vec::with_capacity(2);
        // The cost async-graphql gives the document at its largest page: each field below
        // the list costs at most 1 per session; the counts their aggregate's cost.
        let mut cost: usize = 1;
        for item in &operation.selection_set.node.items {
            let Selection::Field(root) = &item.node else { return None };
            let root = &root.node;
            let kind = RootKind::of(root.name.node.as_str())?;
            if !root.directives.is_empty() || roots.iter().any(|r| r.kind == kind) {
                return None;
            }
            if kind == RootKind::Counts && !budget.counts_allowed {
                return None;
            }
            if root.arguments.iter().any(|(name, _)| !kind.arguments().contains(&name.node.as_str())) {
                return None;
            }
            let key = key_of(root);
            if roots.iter().any(|r| r.key == key) {
                return None;
            }
            let ty = types.field("Query", root.name.node.as_str())?;
            let selection = object(types, &ty.named, &root.selection_set.node, &mut loads)?;
            let below = count(&root.selection_set.node);
            cost = cost.saturating_add(match kind {
                RootKind::Sessions => page_complexity(Some(i32::try_from(MAX_PAGE_SIZE).unwrap_or(i32::MAX)), below),
                RootKind::Counts => AGGREGATE_COST.saturating_add(below),
            });
            roots.push(Root { key, kind, arguments: root.arguments.clone(), selection });
        }
        if !roots.iter().any(|r| r.kind == RootKind::Sessions) {
            return None;
        }
        (cost <= budget.max_cost).then_some(Plan { variables: operation.variable_definitions.clone(), roots, loads })
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

    const BUDGET: Budget = Budget { max_cost: 100_000, counts_allowed: true };

    fn plan(query: &str) -> Option<Plan> {
        let doc = async_graphql::parser::parse_query(query).expect("parses");
        Plan::of(&doc, None, BUDGET)
    }

    #[test]
    fn plain_lists_compile() {
        assert!(plan("query($p: ID!) { sessions(projectId: $p, first: 50) { edges { cursor node { id name owner { email } requestedSlots { cpu memory } } } pageInfo { hasNextPage endCursor } } }").is_some());
        assert!(plan("{ s: sessions(projectId: \"x\", filter: {tab: RUNNING}, orderBy: [{field: NAME, direction: ASC}]) { __typename nodes { __typename t: type } } }").is_some());
        // Every column of the Sessions page, relations included.
        assert!(plan("{ sessions(projectId: \"x\") { nodes { name status type owner { email } project { name } resourceGroup { name } image { name } launchGroup { id name } requestedSlots { cpu memory accelerators { slot amount } } occupiedSlots { all { slot amount } } createdAt elapsedSeconds } } }").is_some());
        // Filter and order as variables, the counts beside the list (the page's document).
        assert!(plan("query($p: ID!, $f: SessionFilter, $c: SessionFilter, $o: [SessionOrder!]) { sessions(projectId: $p, filter: $f, orderBy: $o) { nodes { id pendingReasons { code message } statusChangedBy { kind rule user { email } } } } sessionCounts(projectId: $p, filter: $c) { running finished all byType { type count } } }").is_some());
        assert!(plan("query($p: ID!) { c: sessionCounts(projectId: $p) { running } s: sessions(projectId: $p) { nodes { id } } }").is_some());
    }

    #[test]
    fn anything_else_is_left_to_the_executor() {
        for query in [
            // Another root field beside it, or another root.
            "{ sessions(projectId: \"x\") { nodes { id } } viewer { user { email } } }",
            "{ session(id: \"x\") { id } }",
            // Counts alone, or twice.
            "{ sessionCounts(projectId: \"x\") { running } }",
            "{ sessions(projectId: \"x\") { nodes { id } } a: sessionCounts(projectId: \"x\") { running } b: sessionCounts(projectId: \"x\") { all } }",
            // Two lists.
            "{ a: sessions(projectId: \"x\") { nodes { id } } b: sessions(projectId: \"y\") { nodes { id } } }",
            // Fragments, directives, a key twice, arguments below the root.
            "{ sessions(projectId: \"x\") { nodes { ...F } } } fragment F on Session { id }",
            "{ sessions(projectId: \"x\") { nodes { ... on Session { id } } } }",
            "query($b: Boolean!) { sessions(projectId: \"x\") { nodes { id @include(if: $b) } } }",
            "{ sessions(projectId: \"x\") { nodes { id id } } }",
            "{ sessions(projectId: \"x\") { nodes { a: id a: name } } }",
            "{ s: sessions(projectId: \"x\") { nodes { id } } s: sessionCounts(projectId: \"x\") { all } }",
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
        // Counts the executor would refuse (no aggregate allowed) are its to refuse.
        let doc = async_graphql::parser::parse_query(
            "{ sessions(projectId: \"x\") { nodes { id } } sessionCounts(projectId: \"x\") { all } }",
        )
        .expect("parses");
        assert!(Plan::of(&doc, None, Budget { counts_allowed: false, ..BUDGET }).is_none());
    }

    #[test]
    fn the_operation_is_picked_as_the_executor_picks_it() {
        let named = async_graphql::parser::parse_query("query A { sessions(projectId: \"x\") { nodes { id } } }")
            .expect("parses");
        assert!(Plan::of(&named, Some("A"), BUDGET).is_some());
        assert!(Plan::of(&named, None, BUDGET).is_some());
        assert!(Plan::of(&named, Some("B"), BUDGET).is_none());
        let anonymous =
            async_graphql::parser::parse_query("{ sessions(projectId: \"x\") { nodes { id } } }").expect("parses");
        assert!(Plan::of(&anonymous, Some("A"), BUDGET).is_none());
    }

    #[test]
    fn a_page_that_could_cost_over_the_budget_does_not_compile() {
        let doc =
            async_graphql::parser::parse_query("{ sessions(projectId: \"x\") { nodes { id name } } }").expect("parses");
        let cost = page_complexity(Some(MAX_PAGE_SIZE as i32), 3) + 1;
        assert!(Plan::of(&doc, None, Budget { max_cost: cost, ..BUDGET }).is_some());
        assert!(Plan::of(&doc, None, Budget { max_cost: cost - 1, ..BUDGET }).is_none());
        // With its counts: their aggregate's cost too.
        let doc = async_graphql::parser::parse_query(
            "{ sessions(projectId: \"x\") { nodes { id name } } sessionCounts(projectId: \"x\") { all } }",
        )
        .expect("parses");
        let cost = cost + AGGREGATE_COST + 1;
        assert!(Plan::of(&doc, None, Budget { max_cost: cost, ..BUDGET }).is_some());
        assert!(Plan::of(&doc, None, Budget { max_cost: cost - 1, ..BUDGET }).is_none());
    }
}
