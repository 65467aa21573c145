//! Exporting a session list: exactly the sessions of the list with the same arguments (the
//! same set, filter, visibility and order, through [`SessionSet::page`]), read in keyset
//! batches so that any size takes constant memory, each row as the text of its columns.
//! How the text is written out (CSV, quoting, spreadsheet safety) is the transport's.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use entity::{agent, session};

use super::auth::Viewer;
use super::model::SessionColumnKey;
use super::paging::{MAX_PAGE_SIZE, PageRequest};
use super::sessions::{self, SessionFilter, SessionOrder, SessionPosition, SessionSet};
use super::slots::{self, ResourceSlots};
use super::visibility::{self, SessionScope};
use super::{DomainError, DomainResult, catalog, relations, settings};

/// What to export: the arguments of the list, and the columns.
#[derive(Clone, Debug)]
pub struct ExportRequest {
    pub project_id: Uuid,
    pub scope: SessionScope,
    pub filter: SessionFilter,
    pub orders: Vec<SessionOrder>,
    /// `None`: the viewer's visible list columns, in their order.
    pub columns: Option<Vec<SessionColumnKey>>,
}

/// One column of the file. A list column can give several: ACCELERATORS one per
/// accelerator slot the project's resource groups serve, ELAPSED seconds and a readable text.
#[derive(Clone, Debug, PartialEq)]
enum Column {
    Name,
    Status,
    Accelerator(String),
    Cpu,
    MemoryGib,
    ElapsedSeconds,
    ElapsedText,
    Type,
    Image,
    ResourceGroup,
    Owner,
    Project,
    CreatedAt,
    StartedAt,
    TerminatedAt,
    ClusterSize,
    StatusInfo,
    Result,
    Agent,
    Priority,
    QueuePosition,
}

impl Column {
    fn title(&self) -> String {
        match self {
            Column::Name => "Name".into(),
            Column::Status => "Status".into(),
            Column::Accelerator(slot) => format!("Accelerator {slot}"),
            Column::Cpu => "CPU (cores)".into(),
            Column::MemoryGib => "Memory (GiB)".into(),
            Column::ElapsedSeconds => "Elapsed (s)".into(),
            Column::ElapsedText => "Elapsed".into(),
            Column::Type => "Type".into(),
            Column::Image => "Image".into(),
            Column::ResourceGroup => "Resource group".into(),
            Column::Owner => "Owner".into(),
            Column::Project => "Project".into(),
            Column::CreatedAt => "Created at (UTC)".into(),
            Column::StartedAt => "Started at (UTC)".into(),
            Column::TerminatedAt => "Terminated at (UTC)".into(),
            Column::ClusterSize => "Cluster size".into(),
            Column::StatusInfo => "Status info".into(),
            Column::Result => "Result".into(),
            Column::Agent => "Agent".into(),
            Column::Priority => "Priority".into(),
            Column::QueuePosition => "Queue position".into(),
        }
    }

    /// Whether the cell holds text a user chose or that came from outside (a name, a
    /// message), as opposed to a value this module formats.
    fn is_free_text(&self) -> bool {
        matches!(
            self,
            Column::Name
                | Column::Image
                | Column::ResourceGroup
                | Column::Owner
                | Column::Project
                | Column::StatusInfo
                | Column::Agent
        )
    }
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

/// One batch of rows, and where the next one starts (`None`: this was the last).
pub struct Batch {
    pub rows: Vec<Vec<String>>,
    pub next: Option<SessionPosition>,
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
    let set = sessions::project_sessions(db, viewer, request.project_id, request.scope, &request.filter).await?;
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
            .session_list_columns
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
            SessionColumnKey::Name => columns.push(Column::Name),
            SessionColumnKey::Status => columns.push(Column::Status),
            SessionColumnKey::Accelerators => columns.extend(accelerators.iter().cloned().map(Column::Accelerator)),
            SessionColumnKey::Cpu => columns.push(Column::Cpu),
            SessionColumnKey::Memory => columns.push(Column::MemoryGib),
            SessionColumnKey::Elapsed => columns.extend([Column::ElapsedSeconds, Column::ElapsedText]),
            SessionColumnKey::Type => columns.push(Column::Type),
            SessionColumnKey::Image => columns.push(Column::Image),
            SessionColumnKey::ResourceGroup => columns.push(Column::ResourceGroup),
            SessionColumnKey::Owner => columns.push(Column::Owner),
            SessionColumnKey::Project => columns.push(Column::Project),
            SessionColumnKey::CreatedAt => columns.push(Column::CreatedAt),
            SessionColumnKey::StartedAt => columns.push(Column::StartedAt),
            SessionColumnKey::TerminatedAt => columns.push(Column::TerminatedAt),
            SessionColumnKey::ClusterSize => columns.push(Column::ClusterSize),
            SessionColumnKey::StatusInfo => columns.push(Column::StatusInfo),
            SessionColumnKey::Result => columns.push(Column::Result),
            SessionColumnKey::Agent => columns.push(Column::Agent),
            SessionColumnKey::Priority => columns.push(Column::Priority),
            SessionColumnKey::QueuePosition => columns.push(Column::QueuePosition),
        }
    }
    Ok(Export { set, orders: request.orders.clone(), columns, now, project_name: project.name })
}

/// The accelerator slots (every slot but CPU and memory) the agents of `groups` offer, sorted.
async fn accelerator_slots(db: &impl ConnectionTrait, groups: &[String]) -> DomainResult<Vec<String>> {
    let agents =
        agent::Entity::find().filter(agent::Column::ResourceGroup.is_in(groups.iter().cloned())).all(db).await?;
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

    /// The rows after `after` (from the start with `None`): at most [`BATCH`].
    pub async fn batch(&self, db: &impl ConnectionTrait, after: Option<SessionPosition>) -> DomainResult<Batch> {
        let request = PageRequest { size: BATCH, backward: false, after, before: None };
        let page = self.set.page(db, &self.orders, &request, self.now).await?;
        // Each id once, only when its column is shown.
        let ids = |column: Column, id: fn(&session::Model) -> Uuid| -> Vec<Uuid> {
            if !self.columns.contains(&column) {
                return Vec::new();
            }
            page.rows.iter().map(|(s, _)| id(s)).collect::<BTreeSet<_>>().into_iter().collect()
        };
        let owners: HashMap<Uuid, String> = relations::users(db, &ids(Column::Owner, |s| s.owner_id))
            .await?
            .into_iter()
            .map(|(id, u)| (id, u.email))
            .collect();
        let projects: HashMap<Uuid, String> = relations::projects(db, &ids(Column::Project, |s| s.project_id))
            .await?
            .into_iter()
            .map(|(id, p)| (id, p.name))
            .collect();
        let next = if page.has_next_page { page.rows.last().map(|(_, p)| p.clone()) } else { None };
        let mut rows = Vec::with_capacity(page.rows.len());
        for (s, _) in &page.rows {
            let requested = ResourceSlots::from_json(&s.requested_slots)?;
            rows.push(self.columns.iter().map(|c| self.cell(c, s, &requested, &owners, &projects)).collect());
        }
        Ok(Batch { rows, next })
    }

    fn cell(
        &self,
        column: &Column,
        s: &session::Model,
        requested: &ResourceSlots,
        owners: &HashMap<Uuid, String>,
        projects: &HashMap<Uuid, String>,
    ) -> String {
        let time =
            |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)).unwrap_or_default();
        match column {
            Column::Name => s.name.clone(),
            Column::Status => s.status.clone(),
            Column::Accelerator(slot) => number(requested.get(slot)),
            Column::Cpu => number(requested.get(slots::CPU)),
            Column::MemoryGib => format!("{:.2}", requested.get(slots::MEM) / f64::from(1u32 << 30)),
            Column::ElapsedSeconds => sessions::elapsed_seconds(s, self.now).to_string(),
            Column::ElapsedText => elapsed_text(sessions::elapsed_seconds(s, self.now)),
            Column::Type => s.session_type.clone(),
            Column::Image => s.image.clone(),
            Column::ResourceGroup => s.resource_group.clone(),
            Column::Owner => owners.get(&s.owner_id).cloned().unwrap_or_default(),
            Column::Project => projects.get(&s.project_id).cloned().unwrap_or_default(),
            Column::CreatedAt => time(Some(s.created_at)),
            Column::StartedAt => time(s.started_at),
            Column::TerminatedAt => time(s.terminated_at),
            Column::ClusterSize => s.cluster_size.to_string(),
            Column::StatusInfo => s.status_info.clone().unwrap_or_default(),
            Column::Result => s.result.clone(),
            Column::Agent => s.agent_id.clone().unwrap_or_default(),
            Column::Priority => s.priority.to_string(),
            Column::QueuePosition => s.queue_position.map(|p| p.to_string()).unwrap_or_default(),
        }
    }
}

/// An amount without trailing zeros: `2`, `0.5`, `1.25`.
fn number(x: f64) -> String {
    let text = format!("{x:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-0" { "0".to_owned() } else { text.to_owned() }
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
    let f = &r.filter;
    let names = |v: Option<Vec<&str>>| v.map(|v| v.join(","));
    let time = |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true));
    serde_json::json!([
        r.project_id,
        r.scope.as_str(),
        names(f.types.as_ref().map(|v| v.iter().map(|t| t.as_str()).collect())),
        f.tab.map(|t| t.as_str()),
        names(f.statuses.as_ref().map(|v| v.iter().map(|s| s.as_str()).collect())),
        f.name_contains,
        f.resource_group,
        f.owner_email,
        f.launch_group_id,
        time(f.created_after),
        time(f.created_before),
        r.orders.iter().map(|o| format!("{}:{}", o.field.as_str(), o.descending)).collect::<Vec<_>>(),
        names(r.columns.as_ref().map(|v| v.iter().map(|c| c.as_str()).collect())),
    ])
    .to_string()
}

const KEY_NAME: &str = "export-links";

/// The server's link-signing key: generated on first use and stored, so every replica and
/// every restart shares it.
async fn signing_key(db: &impl ConnectionTrait) -> DomainResult<Vec<u8>> {
    use base64::Engine;
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict, Query};
    let backend = db.get_database_backend();
    let select = Query::select()
        .column(Alias::new("secret"))
        .from(Alias::new("signing_keys"))
        .and_where(ExprTrait::eq(Expr::col(Alias::new("name")), KEY_NAME))
        .to_owned();
    let read = |row: sea_orm::QueryResult| -> DomainResult<Vec<u8>> {
        let text: String = row.try_get("", "secret")?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(DomainError::internal)
    };
    if let Some(row) = db.query_one_raw(backend.build(&select)).await? {
        return read(row);
    }
    let mut secret = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut secret);
    let insert = Query::insert()
        .into_table(Alias::new("signing_keys"))
        .columns([Alias::new("name"), Alias::new("secret"), Alias::new("created_at")])
        .values_panic([
            KEY_NAME.into(),
            base64::engine::general_purpose::STANDARD.encode(secret).into(),
            super::clock::now().into(),
        ])
        // Two replicas starting at once: the first key stays, both read it back.
        .on_conflict(OnConflict::column(Alias::new("name")).do_nothing().to_owned())
        .to_owned();
    db.execute_raw(backend.build(&insert)).await?;
    let row = db.query_one_raw(backend.build(&select)).await?;
    read(row.ok_or_else(|| DomainError::invariant("the signing key vanished"))?)
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
    super::auth::keypair_viewer(db, signature.keypair_id).await?.ok_or_else(refused)
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
}
