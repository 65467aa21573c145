//! Compiled session lists: the page the Sessions page asks for over and over, answered
//! without async-graphql's general executor.
//!
//! The executor resolves every field of every row as a future, builds a tree of values and
//! serializes it; for a 50-row page that is about a third of the server's CPU (see
//! BENCHMARKS.md, "Side by side"). A document seen once is parsed and validated by
//! async-graphql and answered by its executor as any other. If it is a plain session list
//! ([`plan`] says exactly which are) and that answer had no error, its compiled form is
//! kept, by the document's text. The next time the same text comes, the compiled form:
//! coerces the arguments as the executor does, calls the same two functions the list
//! resolver calls (the domain's visibility check and page), and writes each field's value
//! as the executor would ([`render`]).
//!
//! Anything unusual falls back to the executor, which then answers as it always does: a
//! variable it cannot coerce, an error of the domain, a stored value it cannot read. A
//! fallback may have read the page already; it never wrote anything (a list only reads).

mod plan;
mod render;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::{ID, InputType, Value, Variables};
use sea_orm::DatabaseConnection;

use crate::domain::auth::Viewer;

use super::session::{PageArgs, SessionFilter, SessionOrder, SessionScope, project_set, read_page};
pub use plan::Plan;

/// The most documents kept, and the longest kept: enough for every page of a web client,
/// little memory whatever a client sends.
const CAPACITY: usize = 256;
const MAX_DOCUMENT_BYTES: usize = 8 * 1024;

/// The documents seen, by text: compiled or known not to compile.
#[derive(Default)]
pub struct Plans {
    seen: Mutex<HashMap<String, Seen>>,
}

struct Seen {
    operation_name: Option<String>,
    plan: Option<Arc<Plan>>,
}

/// What the cache knows of a document.
pub enum Known {
    /// Not seen (or seen with another operation name).
    Unknown,
    /// Seen; it does not compile.
    Executed,
    Compiled(Arc<Plan>),
}

impl Plans {
    pub fn get(&self, query: &str, operation_name: Option<&str>) -> Known {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match seen.get(query) {
            Some(s) if s.operation_name.as_deref() == operation_name => match &s.plan {
                Some(plan) => Known::Compiled(Arc::clone(plan)),
                None => Known::Executed,
            },
            _ => Known::Unknown,
        }
    }

    /// Remembers `query` after the executor answered it without an error: `plan` is its
    /// compiled form, if it has one.
    pub fn remember(&self, query: &str, operation_name: Option<&str>, plan: Option<Plan>) {
        if query.len() > MAX_DOCUMENT_BYTES {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= CAPACITY && !seen.contains_key(query) {
            // Any one goes: a client's pages come back at once, an attacker's never do.
            if let Some(victim) = seen.keys().next().cloned() {
                seen.remove(&victim);
            }
        }
        seen.insert(
            query.to_owned(),
            Seen { operation_name: operation_name.map(str::to_owned), plan: plan.map(Arc::new) },
        );
    }
}

/// The answer of a compiled list, the response body; `None` when the executor must answer.
pub async fn answer(plan: &Plan, db: &DatabaseConnection, viewer: &Viewer, variables: &Variables) -> Option<Vec<u8>> {
    let arguments = Arguments { plan, variables };
    let project_id: ID = arguments.get("projectId")?;
    let scope: Option<SessionScope> = arguments.get_or("scope", || Some(SessionScope::Mine))?;
    let filter: Option<SessionFilter> = arguments.get("filter")?;
    let order_by: Option<Vec<SessionOrder>> = arguments.get("orderBy")?;
    let args = PageArgs {
        first: arguments.get("first")?,
        after: arguments.get("after")?,
        last: arguments.get("last")?,
        before: arguments.get("before")?,
    };
    let set = project_set(db, viewer, &project_id, scope, filter).await.ok()?;
    let page = read_page(db, &set, order_by, args).await.ok()?;
    render::body(plan, &page, set.project()?).ok()
}

/// The root field's arguments with the request's variables.
struct Arguments<'a> {
    plan: &'a Plan,
    variables: &'a Variables,
}

impl Arguments<'_> {
    /// The argument `name` as the executor reads it (`Context::param_value`): absent, it is
    /// `T`'s reading of nothing; a variable is its value, else its definition's default
    /// (null when nullable).
    fn get<T: InputType>(&self, name: &str) -> Option<T> {
        let value = match self.plan.arguments.iter().find(|(n, _)| n.node == name) {
            None => None,
            Some((_, value)) => Some(value.node.clone().into_const_with(|var| self.variable(&var).ok_or(())).ok()?),
        };
        T::parse(value).ok()
    }

    /// The same for an argument with a default when absent.
    fn get_or<T: InputType>(&self, name: &str, default: fn() -> T) -> Option<T> {
        if self.plan.arguments.iter().all(|(n, _)| n.node != name) {
            return Some(default());
        }
        self.get(name)
    }

    fn variable(&self, name: &str) -> Option<Value> {
        let definition = self.plan.variables.iter().find(|d| d.node.name.node == name)?;
        self.variables.get(&definition.node.name.node).or_else(|| definition.node.default_value()).cloned()
    }
}
