//! Exporting a session list: exactly the sessions of the list with the same arguments (the
//! same set, filter, visibility and order, through [`SessionSet::page`]), read in keyset
//! batches so that any size takes constant memory, each row as the text of its columns.
//! How the text is written out (CSV, quoting, spreadsheet safety) is the transport's.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, FromQueryResult, Iterable, QueryFilter, QueryResult,
};
use uuid::Uuid;

use entity::{agent, session};

use crate::domain::directory::auth::Viewer;
use crate::domain::model::SessionColumnKey;
use crate::domain::model::slots::{self, ResourceSlots};
use crate::domain::sessions::visibility::{self, SessionScope};
use crate::domain::sessions::{self, SessionFilter, SessionOrder, SessionPosition, SessionSet};
use crate::domain::store::paging::{MAX_PAGE_SIZE, PageRequest};
use crate::domain::{
    DomainError, DomainResult, directory::catalog, live::usage, reclaim::expiry, sessions::relations,
    sessions::settings,
};

/// What to export: the arguments of the list, and the columns.
#[derive(Clone, Debug)]
pub struct ExportRequest {
    pub project_id: Uuid,
    pub scope: SessionScope,
    pub filter: SessionFilter,
    pub orders: Vec<SessionOrder>,
    /// `None`: the columns the viewer's list of this scope shows, in their order
    /// ([`settings::UserSettings::columns_shown`]).
    pub columns: Option<Vec<SessionColumnKey>>,
}

/// One column of the file. A list column gives one, except ACCELERATORS (one per
/// accelerator slot the project's resource groups serve), ELAPSED (seconds and a readable
/// text), EXPIRY (when, and why), UTILIZATION (CPU and memory used) and STATUS_CHANGED_BY
/// (who, and their role).
#[derive(Clone, Debug, PartialEq)]
enum Column {
    Key(SessionColumnKey),
    Accelerator(String),
    ElapsedSeconds,
    ElapsedText,
    ExpiresAt,
    ExpiryReason,
    CpuUsed,
    MemoryUsed,
    StatusChangedBy,
    StatusChangedByRole,
}

/// What a cell of a session is made from: its stored row, the instant elapsed times count
/// to, and the names of the owners and projects of its batch, and the e-mail and role of
/// who changed their statuses last.
struct Row<'a> {
    session: &'a session::Model,
    now: DateTime<Utc>,
    owners: &'a HashMap<Uuid, String>,
    projects: &'a HashMap<Uuid, String>,
    actors: &'a HashMap<Uuid, (String, String)>,
}

/// The file's column of each list column, declared once: its title, whether its cells hold
/// free text (a name or a message someone chose, as opposed to a value formatted here), and
/// its cell, read through the same functions of the stored row ([`sessions`]'s) as the
/// list's fields. From the declaration come [`Column::title`], [`Column::is_free_text`]
/// and [`Column::cell`]; a column made of several (named after `parts of`) is declared by
/// its parts.
macro_rules! file_columns {
    (
        $( $key:ident $title:literal $free:ident = |$r:ident| $cell:expr; )*
        ; parts of $( $parted:ident )|+ :
        $( $part:pat => $ptitle:expr, $pfree:ident = |$pr:ident| $pcell:expr; )*
    ) => {
        impl Column {
            fn title(&self) -> String {
                match self {
                    $( Column::Key(SessionColumnKey::$key) => $title.to_owned(), )*
                    $( $part => $ptitle, )*
                    Column::Key($( SessionColumnKey::$parted )|+) => String::new(),
                }
            }

            #[allow(unused_variables)] // a part's bindings, for its title and cell
            fn is_free_text(&self) -> bool {
                match self {
                    $( Column::Key(SessionColumnKey::$key) => file_columns!(@free $free), )*
                    $( $part => file_columns!(@free $pfree), )*
                    Column::Key($( SessionColumnKey::$parted )|+) => false,
                }
            }

            fn cell(&self, row: &Row<'_>) -> DomainResult<String> {
                match self {
                    $( Column::Key(SessionColumnKey::$key) => { let $r = row; $cell } )*
                    $( $part => { let $pr = row; $pcell } )*
                    Column::Key(key @ ($( SessionColumnKey::$parted )|+)) => {
                        Err(DomainError::invariant(format!("{key} is made of several columns")))
                    }
                }
            }
        }
    };
    (@free free) => { true };
    (@free formatted) => { false };
}

file_columns! {
    Name "Name" free = |r| Ok(r.session.name.clone());
    Status "Status" formatted = |r| sessions::status_text(r.session);
    Cpu "CPU (cores)" formatted = |r| Ok(number(sessions::requested_slots(r.session)?.get(slots::CPU)));
    Memory "Memory (GiB)" formatted = |r| Ok(gib(sessions::requested_slots(r.session)?.get(slots::MEM)));
    Type "Type" formatted = |r| Ok(sessions::session_type(r.session)?.as_str().to_owned());
    Image "Image" free = |r| Ok(r.session.image.clone());
    ResourceGroup "Resource group" free = |r| Ok(r.session.resource_group.clone());
    Owner "Owner" free = |r| Ok(r.owners.get(&r.session.owner_id).cloned().unwrap_or_default());
    Project "Project" free = |r| Ok(r.projects.get(&r.session.project_id).cloned().unwrap_or_default());
    CreatedAt "Created at (UTC)" formatted = |r| Ok(time(Some(r.session.created_at)));
    StartedAt "Started at (UTC)" formatted = |r| Ok(time(r.session.started_at));
    TerminatedAt "Terminated at (UTC)" formatted = |r| Ok(time(r.session.terminated_at));
    ClusterSize "Cluster size" formatted = |r| Ok(r.session.cluster_size.to_string());
    StatusInfo "Status info" free = |r| Ok(r.session.status_info.clone().unwrap_or_default());
    Result "Result" formatted = |r| Ok(sessions::result(r.session)?.as_str().to_owned());
    Agent "Agent" free = |r| Ok(r.session.agent_id.clone().unwrap_or_default());
    Priority "Priority" formatted = |r| Ok(r.session.priority.to_string());
    QueuePosition "Queue position" formatted =
        |r| Ok(sessions::queue_position(r.session)?.map(|p| p.to_string()).unwrap_or_default());
    Mounts "Mounts" free = |r| Ok(mounts_text(r.session)?);
    ; parts of Accelerators | Elapsed | Expiry | Utilization | StatusChangedBy:
    Column::Accelerator(slot) => format!("Accelerator {slot}"), formatted =
        |r| Ok(number(sessions::requested_slots(r.session)?.get(slot)));
    Column::ElapsedSeconds => "Elapsed (s)".to_owned(), formatted =
        |r| Ok(sessions::elapsed_seconds(r.session, r.now).to_string());
    Column::ElapsedText => "Elapsed".to_owned(), formatted =
        |r| Ok(elapsed_text(sessions::elapsed_seconds(r.session, r.now)));
    Column::ExpiresAt => "Expires at (UTC)".to_owned(), formatted =
        |r| Ok(time(expiry::of(r.session)?.map(|e| e.at)));
    Column::CpuUsed => "CPU used (cores)".to_owned(), formatted = |r| Ok(used(r.session, slots::CPU, number));
    Column::MemoryUsed => "Memory used (GiB)".to_owned(), formatted = |r| Ok(used(r.session, slots::MEM, gib));
    Column::ExpiryReason => "Expiry reason".to_owned(), formatted =
        |r| Ok(expiry::of(r.session)?.map(|e| e.reason.as_str().to_owned()).unwrap_or_default());
    Column::StatusChangedBy => "Status changed by".to_owned(), free = |r| Ok(changed_by(r));
    Column::StatusChangedByRole => "Status changed by (role)".to_owned(), formatted =
        |r| Ok(r.session.status_actor_user_id.and_then(|id| r.actors.get(&id)).map(|(_, role)| role.clone()).unwrap_or_default());
}

/// A session's mounts, each where the session sees it: `$HOME/data; $HOME/in (read-only)`.
fn mounts_text(s: &session::Model) -> DomainResult<String> {
    let mounts = crate::domain::storage::mounts::of(s)?;
    let shown = mounts.iter().map(|m| if m.read_only { format!("{} (read-only)", m.target()) } else { m.target() });
    Ok(shown.collect::<Vec<_>>().join("; "))
}

/// Who made a session's latest status change: a user's e-mail, or `system: RULE`.
fn changed_by(r: &Row<'_>) -> String {
    match (r.session.status_actor_user_id, &r.session.status_actor_rule) {
        (Some(id), _) => r.actors.get(&id).map(|(email, _)| email.clone()).unwrap_or_default(),
        (None, Some(rule)) => format!("system: {rule}"),
        (None, None) => "system".to_owned(),
    }
}

/// What the session used of `slot` at its latest sample, written by `format`; empty before
/// the first.
fn used(s: &session::Model, slot: &str, format: fn(f64) -> String) -> String {
    usage::of(s).into_iter().find(|u| u.slot == slot).map(|u| format(u.current)).unwrap_or_default()
}

/// A time as the file writes it: RFC 3339 in UTC to the second; empty for none.
fn time(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)).unwrap_or_default()
}

/// A prepared export: checked arguments, the columns, and the instant elapsed times use.
pub struct Export {
    set: SessionSet,
    orders: Vec<SessionOrder>,
    columns: Vec<Column>,
    now: DateTime<Utc>,
    /// The project's name, for the file name.
    pub project_name: String,
}

/// One batch as read from the database, not yet made text: the sessions (the rows a list
/// page reads), the names they refer to, and where the next batch starts (`None`: this was
/// the last).
pub struct Fetched {
    rows: Vec<session::Model>,
    owners: HashMap<Uuid, String>,
    projects: HashMap<Uuid, String>,
    actors: HashMap<Uuid, (String, String)>,
    next: Option<SessionPosition>,
}

/// The task reading an export's batches; dropping it stops the reading.
struct Reader(tokio::task::JoinHandle<()>);

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sessions per batch: four list pages of the largest size (about 2 MB of rows at most).
pub const BATCH: u64 = 4 * MAX_PAGE_SIZE;

/// Checks `request` exactly as the list checks its arguments (visibility, scope, filter),
/// and settles the columns. Nothing is read of the sessions yet.
pub async fn prepare(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    request: &ExportRequest,
    now: DateTime<Utc>,
) -> DomainResult<Export> {
    let set = sessions::project_sessions(db, None, viewer, request.project_id, request.scope, &request.filter).await?;
    let project = visibility::visible_project(db, viewer, request.project_id).await?;
    let keys = match &request.columns {
        Some(keys) if keys.is_empty() => {
            return Err(DomainError::bad_input("EMPTY", Some("columns".to_owned()), "name at least one column"));
        }
        Some(keys) => {
            let mut seen = BTreeSet::new();
            if let Some(dup) = keys.iter().find(|k| !seen.insert(k.as_str())) {
                return Err(DomainError::bad_input(
                    "DUPLICATE",
                    Some("columns".to_owned()),
                    format!("column `{dup}` is named twice"),
                ));
            }
            keys.clone()
        }
        None => settings::user_settings(db, viewer.user_id)
            .await?
            .columns_shown(request.scope)
            .into_iter()
            .filter(|c| c.visible)
            .map(|c| c.column)
            .collect(),
    };
    let accelerators = if keys.contains(&SessionColumnKey::Accelerators) {
        let groups: Vec<String> = match &request.filter.resource_group {
            Some(g) => vec![g.clone()],
            None => catalog::project_resource_groups(db, project.id).await?.into_iter().map(|g| g.name).collect(),
        };
        accelerator_slots(db, &groups).await?
    } else {
        Vec::new()
    };
    let mut columns = Vec::new();
    for key in keys {
        match key {
            SessionColumnKey::Accelerators => columns.extend(accelerators.iter().cloned().map(Column::Accelerator)),
            SessionColumnKey::Elapsed => columns.extend([Column::ElapsedSeconds, Column::ElapsedText]),
            SessionColumnKey::Expiry => columns.extend([Column::ExpiresAt, Column::ExpiryReason]),
            SessionColumnKey::Utilization => columns.extend([Column::CpuUsed, Column::MemoryUsed]),
            SessionColumnKey::StatusChangedBy => {
                columns.extend([Column::StatusChangedBy, Column::StatusChangedByRole]);
            }
            key => columns.push(Column::Key(key)),
        }
    }
    Ok(Export { set, orders: request.orders.clone(), columns, now, project_name: project.name })
}

/// The accelerator slots (every slot but CPU and memory) the agents of `groups` offer, sorted.
async fn accelerator_slots(db: &impl ConnectionTrait, groups: &[String]) -> DomainResult<Vec<String>> {
    let agents = agent::Entity::find()
        .filter(agent::Column::ResourceGroup.is_in(crate::domain::padded(groups.iter().cloned())))
        .all(db)
        .await?;
    let mut names = BTreeSet::new();
    for a in agents {
        let capacity = ResourceSlots::from_json(&a.available_slots)?;
        names.extend(capacity.slot_names().filter(|s| *s != slots::CPU && *s != slots::MEM).map(str::to_owned));
    }
    Ok(names.into_iter().collect())
}

impl Export {
    /// The title of each column, in order.
    pub fn titles(&self) -> Vec<String> {
        self.columns.iter().map(Column::title).collect()
    }

    /// Which columns hold free text (see the transport's spreadsheet safety).
    pub fn free_text(&self) -> Vec<bool> {
        self.columns.iter().map(Column::is_free_text).collect()
    }

    /// Every row of the export as the text of its cells, batch by batch. Batches are read
    /// by a task of their own, one batch ahead of the consumer, so that reading the next batch
    /// and writing out this one overlap; dropping the stream stops the reading.
    pub fn rows(
        self: Arc<Self>,
        db: DatabaseConnection,
    ) -> impl futures_util::Stream<Item = DomainResult<Vec<Vec<String>>>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let reader = {
            let export = self.clone();
            tokio::spawn(async move {
                let mut after = None;
                loop {
                    let fetched = export.fetch(&db, after).await;
                    after = fetched.as_ref().ok().and_then(|f| f.next.clone());
                    let last = after.is_none();
                    if tx.send(fetched).await.is_err() || last {
                        return;
                    }
                }
            })
        };
        futures_util::stream::unfold((rx, Reader(reader)), move |(mut rx, reader)| {
            let export = self.clone();
            async move {
                let texts = rx.recv().await?.and_then(|fetched| export.texts(&fetched));
                Some((texts, (rx, reader)))
            }
        })
    }

    /// The sessions after `after` (from the start with `None`): at most [`BATCH`].
    async fn fetch(&self, db: &impl ConnectionTrait, after: Option<SessionPosition>) -> DomainResult<Fetched> {
        let request = PageRequest { size: BATCH, backward: false, after, before: None };
        let every: Vec<session::Column> = session::Column::iter().collect();
        let read = |row: QueryResult| Ok(session::Model::from_query_result(&row, "")?);
        let (rows, next) = self.set.next_rows(db, &self.orders, &request, self.now, &every, read).await?;
        // Each id once, only when its column is shown.
        let ids = |key: SessionColumnKey, id: fn(&session::Model) -> Uuid| -> Vec<Uuid> {
            if !self.columns.contains(&Column::Key(key)) {
                return Vec::new();
            }
            rows.iter().map(id).collect::<BTreeSet<Uuid>>().into_iter().collect()
        };
        let owners: HashMap<Uuid, String> = relations::users(db, &ids(SessionColumnKey::Owner, |s| s.owner_id))
            .await?
            .into_iter()
            .map(|(id, u)| (id, u.email))
            .collect();
        let projects: HashMap<Uuid, String> =
            relations::projects(db, &ids(SessionColumnKey::Project, |s| s.project_id))
                .await?
                .into_iter()
                .map(|(id, p)| (id, p.name))
                .collect();
        let actor_ids: Vec<Uuid> = if self.columns.contains(&Column::StatusChangedBy) {
            rows.iter().filter_map(|s| s.status_actor_user_id).collect::<BTreeSet<Uuid>>().into_iter().collect()
        } else {
            Vec::new()
        };
        let actors =
            relations::users(db, &actor_ids).await?.into_iter().map(|(id, u)| (id, (u.email, u.role))).collect();
        Ok(Fetched { rows, owners, projects, actors, next })
    }

    /// The cells of a fetched batch, row by row.
    fn texts(&self, fetched: &Fetched) -> DomainResult<Vec<Vec<String>>> {
        let mut rows = Vec::with_capacity(fetched.rows.len());
        for session in &fetched.rows {
            let row = Row {
                session,
                now: self.now,
                owners: &fetched.owners,
                projects: &fetched.projects,
                actors: &fetched.actors,
            };
            rows.push(self.columns.iter().map(|c| c.cell(&row)).collect::<DomainResult<_>>()?);
        }
        Ok(rows)
    }
}

/// An amount without trailing zeros: `2`, `0.5`, `1.25`.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return (x as i64).to_string(); // whole, the usual case: no float formatting
    }
    let text = format!("{x:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-0" { "0".to_owned() } else { text.to_owned() }
}

/// Bytes as GiB with two decimals: `1.00`, `0.50`.
fn gib(bytes: f64) -> String {
    let hundredths = bytes * 100.0 / f64::from(1u32 << 30);
    if hundredths.fract() == 0.0 && hundredths.abs() < 1e15 {
        // Whole hundredths, the usual case: no float formatting.
        let h = hundredths as i64;
        let sign = if h < 0 { "-" } else { "" };
        return format!("{sign}{}.{:02}", h.abs() / 100, h.abs() % 100);
    }
    format!("{:.2}", bytes / f64::from(1u32 << 30))
}

/// Elapsed seconds as the page shows them: `02:03:04`, or `1d 02:03:04` from a day on.
pub fn elapsed_text(seconds: i64) -> String {
    let s = seconds.max(0);
    let (days, rest) = (s / 86_400, s % 86_400);
    let clock = format!("{:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60);
    if days > 0 { format!("{days}d {clock}") } else { clock }
}

/// How long a signed export link works.
pub const LINK_LIFETIME_SECONDS: i64 = 60;

/// A link's proof: who signed it (a keypair), until when (Unix seconds), and the signature
/// over that and the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub keypair_id: Uuid,
    pub expires: i64,
    pub mac: String,
}

/// The request as the text a signature covers: every argument, in a fixed order.
fn canonical(r: &ExportRequest) -> String {
    serde_json::json!([
        r.project_id,
        r.scope.as_str(),
        r.filter.texts(),
        r.orders.iter().map(|o| format!("{}:{}", o.field.as_str(), o.descending)).collect::<Vec<_>>(),
        r.columns.as_ref().map(|v| v.iter().map(|c| c.as_str()).collect::<Vec<_>>()),
    ])
    .to_string()
}

/// The name of the key that signs export links ([`crate::domain::directory::secrets::key`]).
pub const KEY_NAME: &str = "export-links";

/// The server's link-signing key.
pub async fn signing_key(db: &impl ConnectionTrait) -> DomainResult<Vec<u8>> {
    crate::domain::directory::secrets::key(db, KEY_NAME).await
}

fn mac(key: &[u8], keypair_id: Uuid, expires: i64, request: &ExportRequest) -> hmac::Hmac<sha2::Sha256> {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(format!("{keypair_id}\n{expires}\n{}", canonical(request)).as_bytes());
    mac
}

/// Signs `request` for the viewer's keypair, valid for [`LINK_LIFETIME_SECONDS`].
pub async fn sign(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    request: &ExportRequest,
    now: DateTime<Utc>,
) -> DomainResult<Signature> {
    use base64::Engine;
    use hmac::Mac;
    let key = signing_key(db).await?;
    let expires = now.timestamp() + LINK_LIFETIME_SECONDS;
    let tag = mac(&key, viewer.keypair_id, expires, request).finalize().into_bytes();
    Ok(Signature {
        keypair_id: viewer.keypair_id,
        expires,
        mac: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag),
    })
}

/// How every link that does not hold is refused: expired, altered or malformed alike.
pub fn link_refused() -> DomainError {
    DomainError::Forbidden("this export link is expired or not valid: ask for a new one".to_owned())
}

/// The viewer a signed link stands for. `FORBIDDEN` for a link that is expired, altered,
/// or signed by a keypair no longer active: all look the same.
pub async fn verify(
    db: &impl ConnectionTrait,
    signature: &Signature,
    request: &ExportRequest,
    now: DateTime<Utc>,
) -> DomainResult<Viewer> {
    use base64::Engine;
    use hmac::Mac;
    let refused = link_refused;
    if now.timestamp() > signature.expires {
        return Err(refused());
    }
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&signature.mac).map_err(|_| refused())?;
    let key = signing_key(db).await?;
    mac(&key, signature.keypair_id, signature.expires, request).verify_slice(&tag).map_err(|_| refused())?;
    crate::domain::directory::auth::keypair_viewer(db, signature.keypair_id).await?.ok_or_else(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_texts() {
        assert_eq!(elapsed_text(0), "00:00:00");
        assert_eq!(elapsed_text(7384), "02:03:04");
        assert_eq!(elapsed_text(86_400 + 7384), "1d 02:03:04");
        assert_eq!(elapsed_text(-5), "00:00:00");
    }

    #[test]
    fn numbers_without_trailing_zeros() {
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(1.25), "1.25");
        assert_eq!(number(0.0), "0");
    }

    #[test]
    fn gibibytes_with_two_decimals() {
        let g = f64::from(1u32 << 30);
        for (bytes, text) in [(g, "1.00"), (g / 2.0, "0.50"), (0.0, "0.00"), (1e9, "0.93"), (64.0 * g, "64.00")] {
            assert_eq!(gib(bytes), text);
            assert_eq!(gib(bytes), format!("{:.2}", bytes / g), "the fast path formats as the slow one");
        }
    }
}
