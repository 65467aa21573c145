//! Bounds on what a query document can make the server do, checked right after parsing and
//! before anything walks it. async-graphql's recursion-depth check (part of its parse step)
//! and its validation walk every fragment spread as if it were written out: a kilobyte of
//! fragments that each spread the previous one twice expands to millions of fields, all
//! walked inside one poll of the request's future. Here the transport parses the document
//! ([`admit`]), its expanded size is counted in time linear in the document (each
//! fragment's size once), and a document over a bound is refused with `LIMIT_EXCEEDED`
//! before any of that work starts. Then validation computes the cost and depth of what
//! passed, against the schema's limits, and [`explain`] names the budget it went over.

use std::collections::HashMap;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, OperationDefinition, OperationType, Selection, SelectionSet,
    VariableDefinition,
};
use async_graphql::{ErrorExtensionValues, Name, Positioned, Request, ServerError, ServerResult};

use super::result::{BAD_USER_INPUT, GRAPHQL_PARSE_FAILED, LIMIT_EXCEEDED};
use crate::config::GraphqlLimits;

/// How deep fragment spreads may nest within one another.
pub const MAX_SPREAD_NESTING: usize = 32;

/// What one statement of its own costs (a lookup by key, a page read).
pub const STATEMENT_COST: usize = 100;
/// What an aggregate over a whole list costs (a count, the resource panel's sums, a
/// launch's quota check).
pub const AGGREGATE_COST: usize = 5_000;

/// The aggregates (counts, panels, quota checks, the configuration) one request runs: one
/// after the other, at most `--max-aggregates` of them, and none once those that ran have
/// scanned `--max-aggregate-rows` rows together. A document full of counts thus costs one
/// connection for a bounded time, not the whole pool at once; the one over a budget is
/// refused with `LIMIT_EXCEEDED` (and, a count or panel never being null, the answer then
/// has no data: see [`super::roots::settle`]).
pub struct Aggregates {
    max: usize,
    max_rows: u64,
    /// How many have run, and the rows they scanned. Held while one runs.
    used: tokio::sync::Mutex<(usize, u64)>,
}

impl Aggregates {
    pub fn new(limits: &GraphqlLimits) -> Self {
        Self { max: limits.max_aggregates, max_rows: limits.max_aggregate_rows, used: Default::default() }
    }

    /// Runs `aggregate`, which answers with its value and the rows it scanned, when the
    /// request's budget allows.
    pub async fn run<T>(
        &self,
        aggregate: impl std::future::Future<Output = super::result::ApiResult<(T, u64)>>,
    ) -> super::result::ApiResult<T> {
        use crate::domain::DomainError;
        let mut used = self.used.lock().await;
        if used.0 >= self.max {
            let max = self.max;
            return Err(DomainError::LimitExceeded(format!(
                "at most {max} counts, panels or checks per request: ask for the others in another request"
            ))
            .into());
        }
        if used.1 >= self.max_rows {
            return Err(DomainError::LimitExceeded(format!(
                "the counts of this request scanned {} rows already (at most {}): ask for the others in another request",
                used.1, self.max_rows
            ))
            .into());
        }
        used.0 += 1;
        let (value, rows) = aggregate.await?;
        used.1 = used.1.saturating_add(rows);
        Ok(value)
    }
}

/// Runs one aggregate under the request's [`Aggregates`] budget.
pub async fn aggregate<T>(
    ctx: &async_graphql::Context<'_>,
    f: impl std::future::Future<Output = super::result::ApiResult<(T, u64)>>,
) -> super::result::ApiResult<T> {
    match ctx.data_opt::<Aggregates>() {
        Some(budget) => budget.run(f).await,
        None => {
            Err(crate::domain::DomainError::invariant("the request was prepared without its aggregate budget").into())
        }
    }
}

/// What a transport needs to know of the operation a request runs.
pub struct Operation {
    pub ty: OperationType,
    /// The root selection is exactly one field (no fragments): what GraphQL's "single root
    /// field" rule asks of a subscription.
    pub single_root_field: bool,
    /// Its root fields in the document's order, through fragments, each once.
    pub roots: Vec<super::roots::RootField>,
}

/// A request whose document was read once and held against the budgets. The executor runs
/// that parsed document: async-graphql does not parse it again.
pub struct Admitted {
    pub request: Request,
    /// The operation it runs; `None` when the document does not say which (the executor
    /// then reports why).
    pub operation: Option<Operation>,
}

/// Documents already read and within the budgets ([`check`]), by their text: a client's
/// pages come back with the same few documents, which are then copied rather than parsed
/// again. A few hundred short documents at most, whatever clients send.
#[derive(Default)]
pub struct Documents {
    read: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<ExecutableDocument>>>,
}

impl Documents {
    /// Documents kept at most, and the longest kept.
    const CAPACITY: usize = 256;
    const MAX_BYTES: usize = 8 * 1024;

    fn get(&self, query: &str) -> Option<ExecutableDocument> {
        let read = self.read.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        read.get(query).map(|d| ExecutableDocument::clone(d))
    }

    fn keep(&self, query: &str, document: &ExecutableDocument) {
        if query.len() > Self::MAX_BYTES {
            return;
        }
        let mut read = self.read.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if read.len() >= Self::CAPACITY {
            // Any one goes: a client's documents come back at once.
            if let Some(victim) = read.keys().next().cloned() {
                read.remove(&victim);
            }
        }
        read.insert(query.to_owned(), std::sync::Arc::new(document.clone()));
    }
}

/// Reads the document of `request` and refuses it when it is over a budget ([`check`]),
/// before anything else walks it (a document read before and within the budgets is copied
/// from `documents`). This is done by the transports rather than by a schema extension:
/// any extension makes async-graphql route every field of every answer through the
/// extension chain, which cost ~5 % of the server's CPU on a list page. Validation then
/// holds the cost and depth against the schema's limits ([`explain`] names them).
pub fn admit(mut request: Request, limits: &GraphqlLimits, documents: &Documents) -> Result<Admitted, ServerError> {
    let document = match documents.get(&request.query) {
        Some(document) => document,
        None => {
            let document = async_graphql::parser::parse_query(&request.query).map_err(parse_error)?;
            check(&document, limits)?;
            documents.keep(&request.query, &document);
            document
        }
    };
    required_variables(&document, &request)?;
    let operation = operation(&document, request.operation_name.as_deref(), &request.variables);
    request.set_parsed_query(document);
    Ok(Admitted { request, operation })
}

/// The operation of `document` that `name` picks, as the executor picks it: the only one
/// when `None`; an anonymous operation has no name to pick it by.
pub fn selected<'d>(document: &'d ExecutableDocument, name: Option<&str>) -> Option<&'d OperationDefinition> {
    Some(match (&document.operations, name) {
        (DocumentOperations::Single(op), None) => &op.node,
        (DocumentOperations::Multiple(ops), Some(name)) => &ops.get(name)?.node,
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => &ops.values().next()?.node,
        _ => return None,
    })
}

/// What a transport needs of the operation of `document` that `name` picks.
pub fn operation(
    document: &ExecutableDocument,
    name: Option<&str>,
    variables: &async_graphql::Variables,
) -> Option<Operation> {
    let op = selected(document, name)?;
    let items = &op.selection_set.node.items;
    let single_root_field = items.len() == 1 && matches!(items[0].node, Selection::Field(_));
    let roots = super::roots::of(document, &op.selection_set.node, variables);
    Some(Operation { ty: op.ty, single_root_field, roots })
}

fn required_variables(document: &ExecutableDocument, request: &Request) -> Result<(), ServerError> {
    let Some(op) = selected(document, request.operation_name.as_deref()) else { return Ok(()) };
    given_variables(&op.variable_definitions, &request.variables)
}

/// A variable of a non-null type that the request does not give (and has no default) or
/// gives as null is the request's error, before anything runs, as GraphQL's variable
/// coercion has it. async-graphql's validation does not look for it; its executor finds it
/// only when a resolver reads the argument, as an error without a code.
pub fn given_variables(
    definitions: &[Positioned<VariableDefinition>],
    variables: &async_graphql::Variables,
) -> Result<(), ServerError> {
    for definition in definitions {
        let d = &definition.node;
        let problem = match variables.get(&d.name.node) {
            _ if d.var_type.node.nullable => continue,
            None if d.default_value.is_some() => continue,
            None => "was not given",
            Some(async_graphql::Value::Null) => "cannot be null",
            Some(_) => continue,
        };
        let message = format!("variable `${}` of type `{}` {problem}", d.name.node, d.var_type.node);
        let mut error = ServerError::new(message, Some(definition.pos));
        let mut extensions = ErrorExtensionValues::default();
        extensions.set("code", BAD_USER_INPUT);
        error.extensions = Some(extensions);
        return Err(error);
    }
    Ok(())
}

/// async-graphql's validation refuses a query over the cost or depth budget with a bare
/// message: this names the budget. Called by `errors::finalize_errors`, which then gives the
/// code, `LIMIT_EXCEEDED`.
pub(super) fn explain(errors: &mut [ServerError], limits: &GraphqlLimits) {
    for error in errors.iter_mut().filter(|e| e.path.is_empty()) {
        match error.message.as_str() {
            "Query is too complex." => {
                error.message = format!(
                    "the query is too complex: it costs over the limit of {} (a list costs its size times what each item selects; a count or a panel {AGGREGATE_COST})",
                    limits.max_query_cost
                )
            }
            "Query is nested too deep." => {
                error.message =
                    format!("the query is nested too deep: over the limit of {} levels", limits.max_query_depth)
            }
            _ => {}
        }
    }
}

/// How deep async-graphql's own recursion check lets selections and spreads nest
/// together: past both of our bounds, so that ours (which name themselves) refuse first.
pub fn recursion_limit(limits: &GraphqlLimits) -> usize {
    limits.max_query_depth + MAX_SPREAD_NESTING + 2
}

/// The most characters of a syntax error's message: the parser quotes the offending line,
/// which in a one-line document of a megabyte is the whole document.
const MAX_SYNTAX_MESSAGE: usize = 400;

/// A document that does not parse: nested past the parser's limits is `LIMIT_EXCEEDED`;
/// any other syntax error keeps its message, shortened.
fn parse_error(err: async_graphql::parser::Error) -> ServerError {
    let too_deep = matches!(err, async_graphql::parser::Error::RecursionLimitExceeded)
        || err.to_string().contains("stack limit reached");
    if too_deep {
        return refusal("the query nests too deep to be read (over 64 levels of selections, lists or objects)".into());
    }
    let mut error = ServerError::from(err);
    error.extensions.get_or_insert_with(Default::default).set("code", GRAPHQL_PARSE_FAILED);
    if error.message.len() > MAX_SYNTAX_MESSAGE {
        let mut end = MAX_SYNTAX_MESSAGE;
        while !error.message.is_char_boundary(end) {
            end -= 1;
        }
        error.message.truncate(end);
        error.message.push('…');
    }
    error
}

/// Refuses a document over the bounds: its fields and aliases once every fragment is
/// written out, the nesting of its spreads, the fields at the root of each operation.
/// Each fragment is counted once, so this is linear in the document.
pub fn check(document: &ExecutableDocument, limits: &GraphqlLimits) -> ServerResult<()> {
    let mut counter = Counter { document, limits, sizes: HashMap::new(), roots: HashMap::new() };
    let mut total = Size::default();
    for (_, operation) in document.operations.iter() {
        let set = &operation.node.selection_set.node;
        total = total.plus(counter.selections(set, 0)?);
        let roots = counter.root_fields(set, 0);
        if roots > limits.max_root_fields {
            return Err(refusal(format!(
                "an operation selects too many root fields (over {}, aliases included)",
                limits.max_root_fields
            )));
        }
    }
    // Fragments no operation spreads (which validation refuses, after walking them).
    for name in document.fragments.keys() {
        if !counter.sizes.contains_key(name) {
            total = total.plus(counter.fragment(name, 0)?);
        }
    }
    if total.fields > limits.max_query_fields {
        return Err(refusal(format!(
            "the query selects too many fields once its fragments are expanded (over {})",
            limits.max_query_fields
        )));
    }
    if total.aliases > limits.max_aliases {
        return Err(refusal(format!(
            "the query has too many aliases once its fragments are expanded (over {})",
            limits.max_aliases
        )));
    }
    Ok(())
}

/// Fields and aliased fields of a selection, fragments written out.
#[derive(Clone, Copy, Default)]
struct Size {
    fields: usize,
    aliases: usize,
}

impl Size {
    fn plus(self, other: Size) -> Size {
        Size { fields: self.fields.saturating_add(other.fields), aliases: self.aliases.saturating_add(other.aliases) }
    }
}

struct Counter<'a> {
    document: &'a ExecutableDocument,
    limits: &'a GraphqlLimits,
    /// Each fragment's expanded size; `None` while it is being counted (met again: a cycle).
    sizes: HashMap<&'a Name, Option<Size>>,
    /// Each fragment's fields at its own top level, spreads written out.
    roots: HashMap<&'a Name, Option<usize>>,
}

impl<'a> Counter<'a> {
    fn selections(&mut self, set: &'a SelectionSet, nesting: usize) -> ServerResult<Size> {
        let mut n = Size::default();
        for item in &set.items {
            let size = match &item.node {
                Selection::Field(field) => {
                    let own = Size { fields: 1, aliases: usize::from(field.node.alias.is_some()) };
                    own.plus(self.selections(&field.node.selection_set.node, nesting)?)
                }
                Selection::InlineFragment(inline) => self.selections(&inline.node.selection_set.node, nesting)?,
                Selection::FragmentSpread(spread) => self.fragment(&spread.node.fragment_name.node, nesting + 1)?,
            };
            n = n.plus(size);
            if n.fields > self.limits.max_query_fields || n.aliases > self.limits.max_aliases {
                // Over a bound already: no need to count the rest.
                return Ok(n);
            }
        }
        Ok(n)
    }

    fn fragment(&mut self, name: &'a Name, nesting: usize) -> ServerResult<Size> {
        if nesting > MAX_SPREAD_NESTING {
            return Err(refusal(format!("fragment spreads are nested too deep (over {MAX_SPREAD_NESTING})")));
        }
        match self.sizes.get(name) {
            Some(Some(size)) => return Ok(*size),
            // A cycle. Refused here, not left to validation: async-graphql's recursion
            // check, which runs first, would walk a cycle that spreads twice 2^depth times.
            Some(None) => {
                let mut error = ServerError::new(format!("fragment `{name}` spreads itself"), None);
                error.extensions.get_or_insert_with(Default::default).set("code", BAD_USER_INPUT);
                return Err(error);
            }
            None => {}
        }
        // An unknown fragment counts as one field: validation refuses it, but a flood of them
        // is refused first, by the fields' budget, before anything else walks the document.
        let Some(definition) = self.document.fragments.get(name) else { return Ok(Size { fields: 1, aliases: 0 }) };
        self.sizes.insert(name, None);
        let size = self.selections(&definition.node.selection_set.node, nesting)?;
        self.sizes.insert(name, Some(size));
        Ok(size)
    }

    /// The fields of `set` itself, inline fragments and spreads written out (called after
    /// [`Self::selections`] has bounded the spreads' nesting).
    fn root_fields(&mut self, set: &'a SelectionSet, nesting: usize) -> usize {
        let mut n = 0usize;
        for item in &set.items {
            let size = match &item.node {
                Selection::Field(_) => 1,
                Selection::InlineFragment(inline) => self.root_fields(&inline.node.selection_set.node, nesting),
                Selection::FragmentSpread(spread) => {
                    let name = &spread.node.fragment_name.node;
                    match self.roots.get(name) {
                        Some(size) => size.unwrap_or(0),
                        None if nesting > MAX_SPREAD_NESTING => 0,
                        None => match self.document.fragments.get(name) {
                            Some(definition) => {
                                self.roots.insert(name, None);
                                let size = self.root_fields(&definition.node.selection_set.node, nesting + 1);
                                self.roots.insert(name, Some(size));
                                size
                            }
                            None => 0,
                        },
                    }
                }
            };
            n = n.saturating_add(size);
        }
        n
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

    /// A document read once is copied afterwards; one over a budget is refused every time
    /// and never kept; the cache stays bounded.
    #[test]
    fn documents_within_the_budgets_are_read_once() {
        let (limits, documents) = (GraphqlLimits::default(), Documents::default());
        let query = "query A($p: ID!) { sessions(projectId: $p) { totalCount } }";
        let admitted = |q: &str| {
            admit(
                Request::new(q).variables(async_graphql::Variables::from_json(serde_json::json!({"p": "x"}))),
                &limits,
                &documents,
            )
        };
        assert!(admitted(query).is_ok());
        assert!(documents.get(query).is_some(), "kept");
        let again = admitted(query).expect("admitted");
        assert_eq!(again.operation.map(|o| o.ty), Some(OperationType::Query));
        let deep = doubling(40);
        assert!(admitted(&deep).is_err() && admitted(&deep).is_err(), "over a budget each time");
        assert!(documents.get(&deep).is_none(), "never kept");
        for i in 0..Documents::CAPACITY * 2 {
            assert!(admitted(&format!("{{ viewer {{ user {{ email }} }} }} # {i}")).is_ok());
        }
        assert!(documents.read.lock().expect("lock").len() <= Documents::CAPACITY);
    }

    fn doubling(n: usize) -> String {
        let mut q = format!("{{ viewer {{ user {{ ...F{n} }} }} }}\nfragment F0 on User {{ email }}\n");
        for i in 1..=n {
            q.push_str(&format!("fragment F{i} on User {{ ...F{} ...F{} }}\n", i - 1, i - 1));
        }
        q
    }

    fn checked(query: &str) -> ServerResult<()> {
        check(&async_graphql::parser::parse_query(query).expect("parses"), &GraphqlLimits::default())
    }

    #[test]
    fn doubling_fragments_are_counted_once_each_and_refused() {
        assert!(checked(&doubling(5)).is_ok(), "2^5 fields is a fine query");
        let err = checked(&doubling(30)).expect_err("2^30 fields");
        assert!(err.message.contains("too many fields"), "{}", err.message);
    }

    #[test]
    fn unknown_fragments_count_as_fields() {
        let limits = GraphqlLimits::default();
        let spreads: String = (0..limits.max_query_fields + 1).map(|i| format!("...U{i} ")).collect();
        let err = checked(&format!("{{ viewer {{ user {{ {spreads} }} }} }}")).expect_err("too many");
        assert!(err.message.contains("too many fields"), "{}", err.message);
        assert!(checked("{ viewer { user { ...Unknown } } }").is_ok(), "one is validation's to refuse");
    }

    #[test]
    fn deep_spread_chains_and_cycles_end() {
        let mut q = String::from("{ viewer { user { ...F500 } } }\nfragment F0 on User { email }\n");
        for i in 1..=500 {
            q.push_str(&format!("fragment F{i} on User {{ ...F{} }}\n", i - 1));
        }
        assert!(checked(&q).expect_err("nested 500 deep").message.contains("nested too deep"));
        let cycle = "{ viewer { user { ...A } } } fragment A on User { ...B } fragment B on User { ...A email }";
        assert!(checked(cycle).expect_err("a cycle").message.contains("spreads itself"));
        // A cycle that spreads twice at each step, even unused, ends at once.
        let doubling =
            "{ viewer { user { email } } } fragment A on User { ...B ...B } fragment B on User { ...A ...A }";
        assert!(checked(doubling).expect_err("a cycle").message.contains("spreads itself"));
    }

    #[test]
    fn aliases_and_inline_fragments_count() {
        let limits = GraphqlLimits::default();
        let fields: String = (0..limits.max_query_fields + 1).map(|_| "__typename ").collect();
        let err = checked(&format!("{{ viewer {{ {fields} }} }}")).expect_err("too many fields");
        assert!(err.message.contains("too many fields"), "{}", err.message);
        let inline = "{ viewer { ... on Viewer { user { email } } } }";
        assert!(checked(inline).is_ok());

        // Aliases, wherever they are and however they are reached.
        let aliased = |n: usize| -> String { (0..n).map(|i| format!("a{i}: email ")).collect() };
        let ok = format!("{{ viewer {{ user {{ ...A }} }} }} fragment A on User {{ {} }}", aliased(limits.max_aliases));
        assert!(checked(&ok).is_ok());
        let over = format!(
            "{{ viewer {{ user {{ ...A ... on User {{ x: email }} }} }} }} fragment A on User {{ {} }}",
            aliased(limits.max_aliases)
        );
        assert!(checked(&over).expect_err("one alias too many").message.contains("too many aliases"));
    }

    #[test]
    fn root_fields_are_counted_through_fragments() {
        let limits = GraphqlLimits::default();
        let roots = |n: usize| -> String { (0..n).map(|_| "viewer { __typename } ").collect() };
        assert!(checked(&format!("{{ {} }}", roots(limits.max_root_fields))).is_ok());
        // Inline fragments and spreads at the root add their fields (repeated fields merge
        // at run time but are still counted here: the count is of what was asked).
        let spread = format!(
            "{{ ...Q ... on Query {{ viewer {{ __typename }} }} }} fragment Q on Query {{ {} }}",
            roots(limits.max_root_fields)
        );
        let err = checked(&spread).expect_err("one root field too many");
        assert!(err.message.contains("root fields"), "{}", err.message);
        // Cycles are refused.
        let cycle = "{ ...A } fragment A on Query { viewer { __typename } ...B } fragment B on Query { ...A }";
        assert!(checked(cycle).is_err());
    }
}
