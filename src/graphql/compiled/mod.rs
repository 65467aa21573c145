//! Compiled session lists: the page the Sessions page asks for over and over (its list and
//! the counts of its tabs), answered without async-graphql's general executor.
//!
//! The executor resolves every field of every row as a future, builds a tree of values and
//! serializes it; for a 50-row page that is about a third of the server's CPU (see
//! BENCHMARKS.md, "Side by side"). A document seen once is parsed and validated by
//! async-graphql and answered by its executor as any other. If it is a plain session list
//! ([`plan`] says exactly which are) and that answer had no error, its compiled form is
//! kept, by the document's text and operation name. The next time the same text comes, the compiled form:
//! coerces the arguments as the executor does, calls the same functions the list and counts
//! resolvers call (the domain's visibility check, page and counts), and writes each field's
//! value as the executor would ([`render`]), the roots in the document's order (the
//! executor writes them in the order they finish).
//!
//! Anything unusual falls back to the executor, which then answers as it always does: a
//! variable it cannot coerce, an error of the domain, a stored value it cannot read. A
//! fallback may have read the page already; it never wrote anything (a list only reads).

mod fields;
mod plan;
mod render;
mod schema;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::{ID, InputType, Value, Variables};
use sea_orm::DatabaseConnection;

use crate::domain::directory::auth::Viewer;
use crate::domain::directory::credentials::Credentials;
use crate::domain::store::inline::InlineReads;
use crate::domain::{model::clock, sessions::related};

use super::limits;
use super::session_list::{SessionFilter, SessionOrder, SessionScope, project_set, to_domain_orders};
use super::session_paging::{PageArgs, read_page};
use plan::RootKind;
pub use plan::{Budget, Plan};

/// Whether field `field` of object type `object` may be null, as the schema says (a field
/// it does not know, such as `__typename`: yes).
pub fn nullable(object: &str, field: &str) -> bool {
    schema::types().field(object, field).is_none_or(|f| f.nullable)
}

/// The most documents kept, the most operation names kept for one document, and the
/// longest document kept: enough for every page of a web client, little memory whatever a
/// client sends.
const CAPACITY: usize = 256;
const NAMES_PER_DOCUMENT: usize = 4;
const MAX_DOCUMENT_BYTES: usize = 8 * 1024;

/// The compiled lists, by the text of their document and their operation name. Only lists
/// that compiled are kept: anything else is one cheap look at the parsed document
/// ([`Plan::of`]) each time.
#[derive(Default)]
pub struct Plans {
    compiled: Mutex<HashMap<String, Vec<Named>>>,
}

/// A compiled list and the operation name it was asked by.
type Named = (Option<String>, Arc<Plan>);

impl Plans {
    pub fn get(&self, query: &str, operation_name: Option<&str>) -> Option<Arc<Plan>> {
        let compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        let plans = compiled.get(query)?;
        plans.iter().find(|(name, _)| name.as_deref() == operation_name).map(|(_, plan)| Arc::clone(plan))
    }

    /// Whether a document this long is kept.
    pub fn keeps(query: &str) -> bool {
        query.len() <= MAX_DOCUMENT_BYTES
    }

    /// Keeps the compiled form of `query`, once the executor answered it without an error.
    pub fn remember(&self, query: &str, operation_name: Option<&str>, plan: Plan) {
        if !Self::keeps(query) {
            return;
        }
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if compiled.len() >= CAPACITY && !compiled.contains_key(query) {
            // Any one goes: a client's pages come back at once.
            if let Some(victim) = compiled.keys().next().cloned() {
                compiled.remove(&victim);
            }
        }
        let plans = compiled.entry(query.to_owned()).or_default();
        plans.retain(|(name, _)| name.as_deref() != operation_name);
        if plans.len() >= NAMES_PER_DOCUMENT {
            plans.remove(0);
        }
        plans.push((operation_name.map(str::to_owned), Arc::new(plan)));
    }
}

/// The answer of a compiled list, the response body; `None` when the executor must answer.
pub async fn answer(
    plan: &Plan,
    db: &DatabaseConnection,
    inline: Option<&InlineReads>,
    credentials: &Credentials,
    viewer: &Viewer,
    variables: &Variables,
) -> Option<Vec<u8>> {
    limits::given_variables(&plan.variables, variables).ok()?;
    let mut list = None;
    let mut counts = None;
    for root in &plan.roots {
        let arguments = Arguments { plan, root, variables };
        let project_id: ID = arguments.get("projectId")?;
        let scope: Option<SessionScope> = arguments.get_or("scope", || Some(SessionScope::Mine))?;
        let filter: Option<SessionFilter> = arguments.get("filter")?;
        let set = project_set(db, inline, viewer, &project_id, scope, filter).await.ok()?;
        match root.kind {
            RootKind::Sessions => {
                let order_by: Option<Vec<SessionOrder>> = arguments.get("orderBy")?;
                let args = PageArgs {
                    first: arguments.get("first")?,
                    after: arguments.get("after")?,
                    last: arguments.get("last")?,
                    before: arguments.get("before")?,
                };
                let page = read_page(db, inline, &set, &to_domain_orders(order_by), args).await.ok()?;
                list = Some((set, page));
            }
            // The request's first aggregate: within its budget whatever it reads (the plan
            // holds no counts the executor would refuse).
            RootKind::Counts => counts = Some(set.counts(db).await.ok()?),
        }
    }
    let (set, page) = list?;
    // The relations the plan writes, each in one statement, as the executor's prefetch.
    let sessions: Vec<&entity::session::Model> = page.rows.iter().map(|r| &r.session).collect();
    let owners: Vec<&entity::user::Model> = page.rows.iter().map(|r| &r.owner).collect();
    let known = related::Known { owners: &owners, project: set.project(), catalog: Some(credentials) };
    let loaded = related::load(db, &sessions, plan.loads, known).await.ok()?;
    let shared = fields::Page {
        page: &page,
        project: set.project()?,
        now: clock::now(),
        groups: &loaded.resource_groups,
        images: &loaded.images,
        launch_groups: &loaded.launch_groups,
        limits: &loaded.extension_limits,
        actors: &loaded.actors,
        counts: counts.as_ref(),
    };
    render::body(plan, &shared).ok()
}

/// A root field's arguments with the request's variables.
struct Arguments<'a> {
    plan: &'a Plan,
    root: &'a plan::Root,
    variables: &'a Variables,
}

impl Arguments<'_> {
    /// The argument `name` as the executor reads it (`Context::param_value`): absent, it is
    /// `T`'s reading of nothing; a variable is its value, else its definition's default
    /// (null when nullable).
    fn get<T: InputType>(&self, name: &str) -> Option<T> {
        let value = match self.root.arguments.iter().find(|(n, _)| n.node == name) {
            None => None,
            Some((_, value)) => Some(value.node.clone().into_const_with(|var| self.variable(&var).ok_or(())).ok()?),
        };
        T::parse(value).ok()
    }

    /// The same for an argument with a default when absent.
    fn get_or<T: InputType>(&self, name: &str, default: fn() -> T) -> Option<T> {
        if self.root.arguments.iter().all(|(n, _)| n.node != name) {
            return Some(default());
        }
        self.get(name)
    }

    fn variable(&self, name: &str) -> Option<Value> {
        let definition = self.plan.variables.iter().find(|d| d.node.name.node == name)?;
        self.variables.get(&definition.node.name.node).or_else(|| definition.node.default_value()).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let doc =
            async_graphql::parser::parse_query("{ sessions(projectId: \"x\") { nodes { id } } }").expect("parses");
        Plan::of(&doc, None, Budget { max_cost: 100_000, counts_allowed: true }).expect("compiles")
    }

    fn kept(plans: &Plans) -> usize {
        plans.compiled.lock().expect("lock").values().map(Vec::len).sum()
    }

    #[test]
    fn plans_are_kept_by_text_and_name_within_bounds() {
        let plans = Plans::default();
        plans.remember("a", None, plan());
        plans.remember("a", Some("A"), plan());
        assert!(plans.get("a", None).is_some() && plans.get("a", Some("A")).is_some());
        assert!(plans.get("a", Some("B")).is_none() && plans.get("b", None).is_none());
        // Asked again under one name, a document keeps one plan for it.
        plans.remember("a", Some("A"), plan());
        assert_eq!(kept(&plans), 2);
        // A few names per document, the latest kept.
        for name in ["B", "C", "D", "E"] {
            plans.remember("a", Some(name), plan());
        }
        assert_eq!(kept(&plans), NAMES_PER_DOCUMENT);
        assert!(plans.get("a", None).is_none() && plans.get("a", Some("E")).is_some());
        // So many documents, then no more.
        for i in 0..CAPACITY * 2 {
            plans.remember(&format!("query {i}"), None, plan());
        }
        assert_eq!(plans.compiled.lock().expect("lock").len(), CAPACITY);
        assert!(plans.get(&format!("query {}", CAPACITY * 2 - 1), None).is_some());
        // A document too long is not kept.
        let long = "#".repeat(MAX_DOCUMENT_BYTES + 1);
        plans.remember(&long, None, plan());
        assert!(plans.get(&long, None).is_none());
    }
}
