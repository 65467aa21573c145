//! A session list answered by its compiled form is byte for byte what async-graphql's
//! executor answers, for every field the compiled form writes; what it cannot answer (bad
//! variables, a project the caller may not see, a bad cursor) gets the executor's answer;
//! and it runs the same statements.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, project};

const EVERY_FIELD: &str =
    "query($p: ID!, $scope: SessionScope, $first: Int = 20, $after: String, $last: Int, $before: String) {
  list: sessions(projectId: $p, scope: $scope, first: $first, after: $after, last: $last, before: $before) {
    __typename
    pageInfo { __typename hasNextPage hasPreviousPage startCursor endCursor }
    edges { __typename cursor node { __typename id name type status statusInfo result exitCode agent clusterSize
      priority startupCommand batchTimeoutSeconds createdAt scheduledAt startedAt terminatedAt elapsedSeconds
      queuePosition requestedSlots { __typename cpu memory } occupiedSlots { cpu memory }
      owner { __typename id email fullName role } project { __typename id name } } }
    nodes { id age: elapsedSeconds type owner { email } }
  }
}";

const LITERALS: &str = "query($p: ID!) {
  sessions(projectId: $p, scope: PROJECT, first: 30, filter: {tab: FINISHED, types: [BATCH, INTERACTIVE], nameContains: \"a\"},
      orderBy: [{field: NAME, direction: ASC}, {field: CREATED_AT, direction: DESC}]) {
    edges { node { name status createdAt terminatedAt elapsedSeconds requestedSlots { memory cpu } } }
    pageInfo { endCursor hasNextPage }
  }
}";

/// The Sessions page's own list document (`LIST` of web/src/page.ts): the list with every
/// column the page shows, and the counts of its tabs beside it.
fn page_document() -> String {
    crate::support::page_document("page.ts", "LIST")
}

/// The page's variables for its first page of `tab` in `scope`, as refresh() sends them.
pub(crate) fn page_variables(p: &str, scope: &str, tab: &str) -> Value {
    json!({"p": p, "scope": scope, "filter": {"tab": tab}, "counted": {},
           "order": [{"field": "CREATED_AT", "direction": "DESC"}], "first": 20})
}

/// One answer: status, content type and body.
struct Answer {
    status: StatusCode,
    content_type: String,
    body: String,
}

async fn ask(app: &TestApp, token: &str, accept: Option<&str>, query: &str, variables: &Value) -> Answer {
    ask_operation(app, token, accept, query, None, variables).await
}

async fn ask_operation(
    app: &TestApp,
    token: &str,
    accept: Option<&str>,
    query: &str,
    operation: Option<&str>,
    variables: &Value,
) -> Answer {
    let mut req = Request::post("/graphql")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header("x-request-id", "compiled-test");
    if let Some(accept) = accept {
        req = req.header(header::ACCEPT, accept);
    }
    let body = json!({"query": query, "operationName": operation, "variables": variables}).to_string();
    let (status, headers, bytes) = app.send(req.body(Body::from(body)).expect("request")).await;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    Answer { status, content_type, body: String::from_utf8(bytes).expect("UTF-8") }
}

/// How many requests for a compiled list were answered by it (`compiled`) or handed back
/// to the executor (`executor`), from `/metrics`.
async fn compiled(app: &TestApp, answer: &str) -> u64 {
    let (_, _, bytes) = app.get("/metrics").await;
    let text = String::from_utf8(bytes).expect("metrics");
    let line = format!("sessiond_graphql_compiled_total{{answer=\"{answer}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&line)).map_or(0, |n| n.parse().expect("a count"))
}

/// `body` with the figures that move with the clock (`"elapsedSeconds":` and `"age":`)
/// taken out, and those figures.
fn without_clock(body: &str) -> (String, Vec<i64>) {
    let mut rest = body;
    let mut kept = String::new();
    let mut figures = Vec::new();
    loop {
        let next = ["\"elapsedSeconds\":", "\"age\":"].iter().filter_map(|k| rest.find(k).map(|i| (i, k.len()))).min();
        let Some((at, len)) = next else { break };
        kept.push_str(&rest[..at + len]);
        rest = &rest[at + len..];
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '-').unwrap_or(rest.len());
        figures.push(rest[..digits].parse().expect("a figure"));
        kept.push('#');
        rest = &rest[digits..];
    }
    kept.push_str(rest);
    (kept, figures)
}

/// Asks twice: the executor answers the first time, the compiled form the second. Both
/// answers must be the same bytes (elapsed seconds within the second that may pass), with
/// the same statements. Returns the answer. The document gets a comment of its own, so that
/// the executor answers it first whatever was asked before.
async fn same_answer_twice(app: &TestApp, token: &str, accept: Option<&str>, query: &str, variables: Value) -> Value {
    static CASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let query = &format!("{query}\n# case {}", CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let before = compiled(app, "compiled").await;
    let started = std::time::Instant::now();
    let (executed_statements, executed) = app.count_statements(ask(app, token, accept, query, &variables)).await;
    assert_eq!(compiled(app, "compiled").await, before, "the first answer is the executor's");
    let (compiled_statements, answer) = app.count_statements(ask(app, token, accept, query, &variables)).await;
    let took = started.elapsed().as_secs() as i64;
    assert_eq!(compiled(app, "compiled").await, before + 1, "the second answer is compiled: {query}");
    assert_eq!(answer.status, executed.status);
    assert_eq!(answer.content_type, executed.content_type);
    let (executed_body, executed_clock) = without_clock(&executed.body);
    let (body, clock) = without_clock(&answer.body);
    if query.contains("sessionCounts") {
        // Two roots: the executor writes them in the order they finish, the compiled form
        // in the document's. The same JSON, every object's fields in the same order below.
        let roots = |b: &str| -> Vec<(String, String)> {
            let v: serde_json::Map<String, Value> =
                serde_json::from_str::<Value>(b).expect("JSON")["data"].as_object().cloned().expect("data");
            let mut roots: Vec<(String, String)> =
                v.into_iter().map(|(k, v)| (k, without_clock(&v.to_string()).0)).collect();
            roots.sort();
            roots
        };
        assert_eq!(roots(&answer.body), roots(&executed.body), "{query} {variables}");
    } else {
        assert_eq!(body, executed_body, "{query} {variables}");
    }
    assert_eq!(clock.len(), executed_clock.len());
    // Read later, each figure is the same or larger by at most the seconds that passed.
    for (later, earlier) in clock.iter().zip(&executed_clock) {
        assert!((0..=took + 1).contains(&(later - earlier)), "elapsed {later} vs {earlier}");
    }
    assert_eq!(compiled_statements, executed_statements, "the same statements: {query}");
    let answer: Value = serde_json::from_str(&answer.body).expect("JSON");
    assert!(answer.get("errors").is_none(), "{answer}");
    answer
}

async fn the_compiled_list_answers_what_the_executor_answers(app: TestApp) {
    app.generate(400, 7).await;
    // Generated sessions have no batch timeouts or queue positions: some get them.
    use entity::session::{Column, Entity};
    use sea_orm::sea_query::Expr;
    let batch = Entity::update_many().col_expr(Column::BatchTimeoutSeconds, Expr::value(7200_i64));
    batch.filter(Column::SessionType.eq("BATCH")).exec(&app.db).await.expect("timeouts");
    let newest = Entity::find()
        .filter(Column::ProjectId.eq(sessiond::domain::directory::seed::demo_project_id("default/default")))
        .order_by_desc(Column::CreatedAt)
        .one(&app.db)
        .await
        .expect("read")
        .expect("a session");
    let queued = Entity::update_many().col_expr(Column::Status, Expr::value("PENDING"));
    let queued = queued.col_expr(Column::QueuePosition, Expr::value(3));
    queued.filter(Column::Id.eq(newest.id)).exec(&app.db).await.expect("a queue position");
    let p = project("default/default");

    // Every field, every page direction, by an administrator and by a user.
    let first = same_answer_twice(&app, "demo-admin", None, EVERY_FIELD, json!({"p": p, "scope": "PROJECT"})).await;
    let list = &first["data"]["list"];
    assert_eq!(list["edges"].as_array().map(Vec::len), Some(20), "{first}");
    assert_eq!(list["pageInfo"]["hasNextPage"], json!(true));
    let end = list["pageInfo"]["endCursor"].clone();
    let vars = json!({"p": p, "scope": "PROJECT", "first": 200, "after": end});
    let second = same_answer_twice(&app, "demo-admin", None, EVERY_FIELD, vars).await;
    assert_eq!(second["data"]["list"]["pageInfo"]["hasPreviousPage"], json!(true));
    // Each optional field is written with a value as well as null on these pages.
    let nodes: Vec<&Value> = [list, &second["data"]["list"]]
        .iter()
        .flat_map(|l| l["edges"].as_array().expect("edges"))
        .map(|e| &e["node"])
        .collect();
    for field in [
        "statusInfo",
        "exitCode",
        "agent",
        "startupCommand",
        "batchTimeoutSeconds",
        "scheduledAt",
        "startedAt",
        "terminatedAt",
        "queuePosition",
    ] {
        assert!(nodes.iter().any(|n| n[field].is_null()), "{field} is never null");
        assert!(nodes.iter().any(|n| !n[field].is_null()), "{field} is always null");
    }
    let vars = json!({"p": p, "scope": "PROJECT", "first": null, "last": 7, "before": end});
    same_answer_twice(&app, "demo-admin", None, EVERY_FIELD, vars).await;
    let mine = same_answer_twice(&app, "demo-alice", None, EVERY_FIELD, json!({"p": p})).await;
    let emails: Vec<&Value> =
        mine["data"]["list"]["nodes"].as_array().expect("nodes").iter().map(|n| &n["owner"]["email"]).collect();
    assert!(!emails.is_empty() && emails.iter().all(|e| *e == "alice@example.com"), "{mine}");

    // No scope (its default), aliases inside the objects, by a user.
    let bare = "query($p: ID!) { sessions(projectId: $p, first: 10) { pageInfo { s: startCursor __typename }
      nodes { __typename id owner { e: email __typename r: role } project { n: name i: id } occupiedSlots { __typename c: cpu } } } }";
    same_answer_twice(&app, "demo-bob", None, bare, json!({"p": p})).await;

    // An empty page; the other media type.
    same_answer_twice(&app, "demo-admin", None, EVERY_FIELD, json!({"p": p, "first": 0})).await;
    let accept = Some("application/graphql-response+json");
    same_answer_twice(&app, "demo-admin", accept, EVERY_FIELD, json!({"p": p, "scope": "PROJECT", "first": 3})).await;

    // Literal filter and order, on another project.
    let research = project("default/research");
    let literal = same_answer_twice(&app, "demo-admin", None, LITERALS, json!({"p": research})).await;
    assert!(literal["data"]["sessions"]["edges"].as_array().is_some_and(|e| !e.is_empty()), "{literal}");
    same_answer_twice(&app, "demo-admin", None, LITERALS, json!({"p": p})).await;

    // The Sessions page's own document: its list and counts, filter and order as
    // variables, pending reasons and who changed each status (a user, an administrator who
    // is not the owner, the system), on each tab, as an administrator and as a user.
    let waiting = json!([{"code": "NO_CAPACITY", "message": "no agent has room now", "layer": "RESOURCE_GROUP"}]);
    let reasons = Entity::update_many().col_expr(Column::PendingReasons, Expr::value(waiting));
    reasons.filter(Column::Id.eq(newest.id)).exec(&app.db).await.expect("reasons");
    let admin = sessiond::domain::directory::seed::demo_user_id("admin@example.com");
    let by_admin = Entity::update_many().col_expr(Column::StatusActorUserId, Expr::value(admin));
    by_admin.filter(Column::Status.eq("TERMINATED")).exec(&app.db).await.expect("actors");
    let document = page_document();
    for (token, scope, tab) in [
        ("demo-admin", "PROJECT", "FINISHED"),
        ("demo-admin", "PROJECT", "RUNNING"),
        ("demo-alice", "MINE", "FINISHED"),
    ] {
        let answer = same_answer_twice(&app, token, None, &document, page_variables(&p, scope, tab)).await;
        let rows = answer["data"]["sessions"]["edges"].as_array().expect("edges");
        assert!(!rows.is_empty(), "{answer}");
        assert!(answer["data"]["sessionCounts"]["finished"].as_i64().is_some_and(|n| n > 0), "{answer}");
        if tab == "RUNNING" {
            let listed = rows.iter().any(|r| r["node"]["pendingReasons"][0]["code"] == "NO_CAPACITY");
            assert!(listed, "a waiting session's reasons: {answer}");
        } else {
            let actors: Vec<&Value> = rows.iter().map(|r| &r["node"]["statusChangedBy"]["user"]).collect();
            assert!(actors.iter().any(|a| a.is_null()), "the system's: {answer}");
            assert!(actors.iter().any(|a| !a.is_null()), "a user's: {answer}");
        }
    }

    // A document, once compiled, stays compiled for other variables and callers.
    ask(&app, "demo-bob", None, EVERY_FIELD, &json!({"p": research})).await;
    let before = compiled(&app, "compiled").await;
    for project_name in ["default/default", "default/research"] {
        ask(
            &app,
            "demo-admin",
            None,
            EVERY_FIELD,
            &json!({"p": project(project_name), "scope": "PROJECT", "first": 5}),
        )
        .await;
    }
    assert_eq!(compiled(&app, "compiled").await, before + 2);
    assert_eq!(compiled(&app, "executor").await, 0, "nothing was handed back");
}

async fn what_the_compiled_list_cannot_answer_the_executor_does(app: TestApp) {
    app.generate(60, 3).await;
    let p = project("default/default");
    let cursor = ask(&app, "demo-admin", None, EVERY_FIELD, &json!({"p": p, "scope": "PROJECT"})).await;
    assert_eq!(cursor.status, StatusCode::OK);
    let compiled_query = EVERY_FIELD;
    // The same document, written otherwise: never answered without an error, so never compiled.
    let executed_query = format!("{EVERY_FIELD} ");
    for (token, variables) in [
        // Variables the executor refuses or cannot coerce.
        ("demo-admin", json!({})),
        ("demo-admin", json!({"p": null})),
        ("demo-admin", json!({"p": p, "first": "5"})),
        ("demo-admin", json!({"p": p, "first": 2.5})),
        ("demo-admin", json!({"p": p, "scope": "EVERYONE"})),
        ("demo-admin", json!({"p": p, "first": 3_000_000_000_i64})),
        // The domain's refusals.
        ("demo-admin", json!({"p": p, "first": 100_000})),
        ("demo-admin", json!({"p": p, "first": 5, "last": 5})),
        ("demo-admin", json!({"p": p, "after": "not a cursor"})),
        ("demo-admin", json!({"p": "not an id"})),
        ("demo-admin", json!({"p": 5})),
        ("demo-alice", json!({"p": p, "scope": "PROJECT"})),
        ("demo-carol", json!({"p": p})),
        ("demo-admin", json!({"p": project("other/other"), "scope": "PROJECT"})),
    ] {
        let fell_back = compiled(&app, "executor").await;
        let answer = ask(&app, token, None, compiled_query, &variables).await;
        assert_eq!(compiled(&app, "executor").await, fell_back + 1, "{variables}: handed back");
        let executed = ask(&app, token, None, &executed_query, &variables).await;
        assert_eq!((answer.status, &answer.body), (executed.status, &executed.body), "{token} {variables}");
        let body: Value = serde_json::from_str(&answer.body).expect("JSON");
        assert!(body.get("errors").is_some(), "{token} {variables}: {body}");
    }
    // The page's document with variables the executor refuses, or the domain refuses.
    let document = page_document();
    ask(&app, "demo-admin", None, &document, &page_variables(&p, "PROJECT", "FINISHED")).await;
    for (token, variables) in [
        ("demo-admin", json!({"p": p, "scope": "PROJECT", "filter": {"tab": "SOMETIMES"}})),
        ("demo-admin", json!({"p": p, "scope": "PROJECT", "filter": {"nameContains": "a\u{0}b"}})),
        ("demo-admin", json!({"p": p, "scope": "PROJECT", "order": [{"field": "COLOUR", "direction": "ASC"}]})),
        ("demo-admin", json!({"p": p, "scope": "PROJECT", "counted": {"createdAfter": "0000-01-01T00:00:00Z"}})),
        ("demo-alice", json!({"p": p, "scope": "PROJECT"})),
    ] {
        let fell_back = compiled(&app, "executor").await;
        let answer = ask(&app, token, None, &document, &variables).await;
        assert_eq!(compiled(&app, "executor").await, fell_back + 1, "{variables}: handed back");
        let body: Value = serde_json::from_str(&answer.body).expect("JSON");
        assert!(body.get("errors").is_some(), "{token} {variables}: {body}");
    }
    // A required variable not given is the request's error: nothing ran.
    let missing = ask(&app, "demo-admin", Some("application/graphql-response+json"), compiled_query, &json!({})).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.body);
    let missing: Value = serde_json::from_str(&missing.body).expect("JSON");
    assert!(missing.get("data").is_none(), "{missing}");
    assert_eq!(missing["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    assert_eq!(missing["errors"][0]["message"], "variable `$p` of type `ID!` was not given");
    // A document of two operations is never compiled: validation weighs the cost of the one
    // not run too, reading its arguments with the request's variables.
    let two = "query A($p: ID!) { sessions(projectId: $p) { nodes { id } } }
      query B($n: Int!) { sessions(projectId: \"x\", first: $n) { nodes { id } } }";
    let before = compiled(&app, "compiled").await;
    let errors = |answer: &Answer| serde_json::from_str::<Value>(&answer.body).expect("JSON").get("errors").cloned();
    let ran = ask_operation(&app, "demo-admin", None, two, Some("A"), &json!({"p": p, "n": 1})).await;
    assert!(errors(&ran).is_none(), "{}", ran.body);
    let refused = ask_operation(&app, "demo-admin", None, two, Some("A"), &json!({"p": p})).await;
    assert!(errors(&refused).is_some(), "{}", refused.body);
    // An anonymous operation asked for by a name is not there.
    let named = ask_operation(&app, "demo-admin", None, compiled_query, Some("X"), &json!({"p": p})).await;
    assert_eq!(errors(&named).expect("an error")[0]["message"], r#"Unknown operation named "X""#);
    assert_eq!(compiled(&app, "compiled").await, before);

    // Still compiled for good variables.
    let before = compiled(&app, "compiled").await;
    let again = ask(&app, "demo-admin", None, compiled_query, &json!({"p": p, "first": 1})).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(compiled(&app, "compiled").await, before + 1);

    // A row the executor cannot read (an owner's stored role) is the executor's error.
    let query = "query($p: ID!) { sessions(projectId: $p, scope: PROJECT) { nodes { owner { email } } } }";
    let executed_query = format!("{query} ");
    let first = ask(&app, "demo-admin", None, query, &json!({"p": p})).await;
    let first: Value = serde_json::from_str(&first.body).expect("JSON");
    // Anyone's but the administrator's, who is asking.
    let owner = first["data"]["sessions"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["owner"]["email"].as_str())
        .find(|email| *email != "admin@example.com")
        .expect("a session of someone else")
        .to_owned();
    entity::user::Entity::update_many()
        .col_expr(entity::user::Column::Role, sea_orm::sea_query::Expr::value("WIZARD"))
        .filter(entity::user::Column::Email.eq(owner))
        .exec(&app.db)
        .await
        .expect("spoil a role");
    let fell_back = compiled(&app, "executor").await;
    let answer = ask(&app, "demo-admin", None, query, &json!({"p": p})).await;
    assert_eq!(compiled(&app, "executor").await, fell_back + 1);
    let executed = ask(&app, "demo-admin", None, &executed_query, &json!({"p": p})).await;
    assert_eq!(answer.body, executed.body);
    assert!(answer.body.contains("INTERNAL"), "{}", answer.body);
}

/// The fields of each object a generated document may select: leaves, and objects with
/// their type's fields. A few are never compiled (they take a statement or arguments of
/// their own): their documents must be answered alike as well.
fn fields_of(type_name: &str) -> &'static [(&'static str, Option<&'static str>)] {
    match type_name {
        "SessionConnection" => &[
            ("edges", Some("SessionEdge")),
            ("nodes", Some("Session")),
            ("pageInfo", Some("PageInfo")),
            ("totalCount", None),
        ],
        "SessionEdge" => &[("cursor", None), ("node", Some("Session"))],
        "PageInfo" => &[("hasNextPage", None), ("hasPreviousPage", None), ("startCursor", None), ("endCursor", None)],
        "Session" => &[
            ("id", None),
            ("name", None),
            ("type", None),
            ("status", None),
            ("statusInfo", None),
            ("result", None),
            ("exitCode", None),
            ("agent", None),
            ("clusterSize", None),
            ("priority", None),
            ("startupCommand", None),
            ("batchTimeoutSeconds", None),
            ("createdAt", None),
            ("scheduledAt", None),
            ("startedAt", None),
            ("terminatedAt", None),
            ("elapsedSeconds", None),
            ("queuePosition", None),
            ("requestedSlots", Some("ResourceSlots")),
            ("occupiedSlots", Some("ResourceSlots")),
            ("owner", Some("User")),
            ("project", Some("Project")),
            ("resourceGroup", Some("ResourceGroup")),
            ("image", Some("Image")),
            ("launchGroup", Some("LaunchGroup")),
            ("pendingReasons", Some("PendingReason")),
        ],
        "ResourceSlots" => {
            &[("cpu", None), ("memory", None), ("accelerators", Some("SlotAmount")), ("all", Some("SlotAmount"))]
        }
        "SlotAmount" => &[("slot", None), ("amount", None)],
        "User" => &[("id", None), ("email", None), ("fullName", None), ("role", None)],
        "Project" => &[("id", None), ("name", None)],
        "ResourceGroup" => &[
            ("name", None),
            ("description", None),
            ("strategy", None),
            ("pendingTimeoutSeconds", None),
            ("allowedSessionTypes", None),
        ],
        "Image" => &[("name", None), ("supportedTypes", None), ("minimumSlots", Some("SlotAmount")), ("apps", None)],
        "LaunchGroup" => &[("id", None), ("name", None), ("count", None), ("createdAt", None)],
        "PendingReason" => &[("code", None), ("message", None)],
        other => panic!("no fields for {other}"),
    }
}

/// Random documents of the session list, from one seed.
struct Documents {
    rng: rand_chacha::ChaCha8Rng,
    aliases: usize,
}

impl Documents {
    fn chance(&mut self, p: f64) -> bool {
        use rand::Rng;
        self.rng.random_bool(p)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        use rand::Rng;
        &items[self.rng.random_range(0..items.len())]
    }

    /// A selection of `type_name`: a few of its fields in any order, some aliased, maybe
    /// `__typename`, objects below `depth` levels.
    fn selection(&mut self, type_name: &str, depth: usize) -> String {
        use rand::seq::SliceRandom;
        let mut fields: Vec<_> = fields_of(type_name).iter().filter(|(_, o)| depth > 0 || o.is_none()).collect();
        // Rarely a field that is never compiled.
        fields.retain(|(name, _)| !matches!(*name, "totalCount" | "pendingReasons") || self.chance(0.1));
        fields.shuffle(&mut self.rng);
        let take = {
            use rand::Rng;
            self.rng.random_range(1..=fields.len().clamp(1, 8))
        };
        let mut out = Vec::new();
        if self.chance(0.2) {
            out.push(self.aliased("__typename"));
        }
        for (name, object) in fields.into_iter().take(take) {
            let field = if *name == "elapsedSeconds" { (*name).to_owned() } else { self.aliased(name) };
            match object {
                None => out.push(field),
                Some(inner) => {
                    let inner = self.selection(inner, depth - 1);
                    out.push(format!("{field} {{ {inner} }}"));
                }
            }
        }
        if out.is_empty() { "__typename".to_owned() } else { out.join(" ") }
    }

    fn aliased(&mut self, name: &str) -> String {
        if self.chance(0.2) {
            self.aliases += 1;
            format!("a{}: {name}", self.aliases)
        } else {
            name.to_owned()
        }
    }

    /// A whole document and its variables.
    fn document(&mut self, project: &str, cursors: &[String]) -> (String, Value) {
        let mut definitions = vec!["$p: ID!".to_owned()];
        let mut arguments = vec!["projectId: $p".to_owned()];
        let mut variables = json!({"p": project});
        match self.pick(&[0, 1, 2]) {
            0 => {}
            1 => arguments.push(format!("scope: {}", self.pick(&["MINE", "PROJECT"]))),
            _ => {
                definitions.push("$scope: SessionScope".into());
                arguments.push("scope: $scope".into());
                variables["scope"] = json!(self.pick(&["MINE", "PROJECT"]));
            }
        }
        let size = *self.pick(&[0, 1, 2, 5, 12]);
        let backward = self.chance(0.2);
        let (count, cursor) = if backward { ("last", "before") } else { ("first", "after") };
        if self.chance(0.5) {
            definitions.push(format!("${count}: Int"));
            arguments.push(format!("{count}: ${count}"));
            variables[count] = json!(size);
        } else {
            arguments.push(format!("{count}: {size}"));
        }
        if !cursors.is_empty() && self.chance(0.3) {
            definitions.push(format!("${cursor}: String"));
            arguments.push(format!("{cursor}: ${cursor}"));
            variables[cursor] = json!(self.pick(cursors));
        }
        let mut filter = Vec::new();
        for (p, condition) in [
            (0.2, "tab: RUNNING"),
            (0.2, "tab: FINISHED"),
            (0.15, "types: [BATCH, INTERACTIVE]"),
            (0.1, "statuses: [RUNNING, TERMINATED, PENDING]"),
            (0.15, "nameContains: \"a\""),
            (0.1, "resourceGroup: \"default\""),
            (0.05, "ownerEmail: \"bob@example.com\""),
            (0.1, "createdAfter: \"2020-01-01T00:00:00Z\""),
        ] {
            if self.chance(p) && !(condition.starts_with("tab") && filter.iter().any(|f: &&str| f.starts_with("tab"))) {
                filter.push(condition);
            }
        }
        if !filter.is_empty() {
            arguments.push(format!("filter: {{{}}}", filter.join(", ")));
        }
        if self.chance(0.4) {
            let field = self.pick(&["CREATED_AT", "NAME", "STATUS", "TYPE", "TERMINATED_AT"]);
            let direction = self.pick(&["ASC", "DESC"]);
            arguments.push(format!("orderBy: [{{field: {field}, direction: {direction}}}]"));
        }
        let root = if self.chance(0.2) { "list: sessions" } else { "sessions" };
        let selection = self.selection("SessionConnection", 4);
        let document =
            format!("query({}) {{ {root}({}) {{ {selection} }} }}", definitions.join(", "), arguments.join(", "));
        (document, variables)
    }
}

/// Every cursor of an answer.
fn cursors_in(body: &Value, out: &mut Vec<String>) {
    match body {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::String(s) if key.ends_with("ursor") => out.push(s.clone()),
                    other => cursors_in(other, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| cursors_in(i, out)),
        _ => {}
    }
}

/// A thousand generated documents (fields, nesting, aliases, `__typename`, variables,
/// orders, filters, page sizes and cursors), each asked by every demo role: the compiled
/// answer is the executor's, byte for byte (status, data, errors).
async fn generated_lists_are_answered_alike(app: TestApp) {
    use rand::SeedableRng;
    app.generate(120, 11).await;
    let seed = 20_261_202;
    let mut documents = Documents { rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed), aliases: 0 };
    let projects = [project("default/default"), project("default/research"), project("other/other")];
    let roles = ["demo-alice", "demo-bob", "demo-admin", "demo-root", "demo-carol"];
    let mut cursors = Vec::new();
    let (compiled_before, fell_back_before) = (compiled(&app, "compiled").await, compiled(&app, "executor").await);
    let mut pairs = 0;
    for case in 0..1000 {
        let p = documents.pick(&projects).clone();
        let (document, variables) = documents.document(&p, &cursors);
        for role in roles {
            // The first time the executor answers (and the document compiles, if it can); the
            // second time the compiled form answers, or hands back to the executor.
            let query = format!("{document}\n# case {case} {role}");
            let executed = ask(&app, role, None, &query, &variables).await;
            let answer = ask(&app, role, None, &query, &variables).await;
            pairs += 1;
            let context = format!("seed {seed}, case {case}, {role}: {query}\n{variables}");
            assert_eq!(answer.status, executed.status, "{context}");
            assert_eq!(answer.content_type, executed.content_type, "{context}");
            assert_eq!(without_clock(&answer.body).0, without_clock(&executed.body).0, "{context}");
            if cursors.len() < 200 {
                cursors_in(&serde_json::from_str(&answer.body).expect("JSON"), &mut cursors);
            }
        }
    }
    let compiled_answers = compiled(&app, "compiled").await - compiled_before;
    let handed_back = compiled(&app, "executor").await - fell_back_before;
    assert_eq!(pairs, 5000);
    // Most lists compile; what does not (errors of the domain, fields that are never
    // compiled) was answered alike all the same.
    assert!(compiled_answers > 1000, "{compiled_answers} compiled, {handed_back} handed back");
}

db_tests!(
    the_compiled_list_answers_what_the_executor_answers,
    what_the_compiled_list_cannot_answer_the_executor_does,
    generated_lists_are_answered_alike
);
