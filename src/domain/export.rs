//! Exporting a session list: exactly the sessions of the list with the same arguments (the
//! same set, filter, visibility and order, through [`SessionSet::page`]), read in keyset
//! batches so that any size takes constant memory, each row as the text of its columns.
//! How the text is written out (CSV, quoting, spreadsheet safety) is the transport's.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, IdenStatic, QueryFilter, QueryResult, TryGetable,
};
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

/// One column of the file. A list column gives one, except ACCELERATORS (one per
/// accelerator slot the project's resource groups serve) and ELAPSED (seconds and a readable
/// text).
#[derive(Clone, Debug, PartialEq)]
enum Column {
    Key(SessionColumnKey),
    Accelerator(String),
    ElapsedSeconds,
    ElapsedText,
}

impl Column {
    fn title(&self) -> String {
        use SessionColumnKey as K;
        match self {
            Column::Accelerator(slot) => format!("Accelerator {slot}"),
            Column::ElapsedSeconds => "Elapsed (s)".into(),
            Column::ElapsedText => "Elapsed".into(),
            Column::Key(key) => match key {
                K::Name => "Name",
                K::Status => "Status",
                K::Accelerators => "Accelerators",
                K::Cpu => "CPU (cores)",
                K::Memory => "Memory (GiB)",
                K::Elapsed => "Elapsed",
                K::Type => "Type",
                K::Image => "Image",
                K::ResourceGroup => "Resource group",
                K::Owner => "Owner",
                K::Project => "Project",
                K::CreatedAt => "Created at (UTC)",
                K::StartedAt => "Started at (UTC)",
                K::TerminatedAt => "Terminated at (UTC)",
                K::ClusterSize => "Cluster size",
                K::StatusInfo => "Status info",
                K::Result => "Result",
                K::Agent => "Agent",
                K::Priority => "Priority",
                K::QueuePosition => "Queue position",
            }
            .into(),
        }
    }

    /// Whether the cell holds text a user chose or that came from outside (a name, a
    /// message), as opposed to a value this module formats.
    fn is_free_text(&self) -> bool {
        use SessionColumnKey as K;
        matches!(
            self,
            Column::Key(K::Name | K::Image | K::ResourceGroup | K::Owner | K::Project | K::StatusInfo | K::Agent)
        )
    }

    /// The columns of the sessions table its cells are made from.
    fn reads(&self) -> &'static [session::Column] {
        use SessionColumnKey as K;
        use session::Column as C;
        match self {
            Column::Accelerator(_) => &[C::RequestedSlots],
            Column::ElapsedSeconds | Column::ElapsedText => &[C::CreatedAt, C::TerminatedAt],
            Column::Key(key) => match key {
                K::Name => &[C::Name],
                K::Status => &[C::Status],
                K::Accelerators | K::Cpu | K::Memory => &[C::RequestedSlots],
                K::Elapsed => &[C::CreatedAt, C::TerminatedAt],
                K::Type => &[C::SessionType],
                K::Image => &[C::Image],
                K::ResourceGroup => &[C::ResourceGroup],
                K::Owner => &[C::OwnerId],
                K::Project => &[C::ProjectId],
                K::CreatedAt => &[C::CreatedAt],
                K::StartedAt => &[C::StartedAt],
                K::TerminatedAt => &[C::TerminatedAt],
                K::ClusterSize => &[C::ClusterSize],
                K::StatusInfo => &[C::StatusInfo],
                K::Result => &[C::Result],
                K::Agent => &[C::AgentId],
                K::Priority => &[C::Priority],
                K::QueuePosition => &[C::Status, C::QueuePosition],
            },
        }
    }
}

/// A prepared export: checked arguments, the columns, and the instant elapsed times use.
pub struct Export {
    set: SessionSet,
    orders: Vec<SessionOrder>,
    columns: Vec<Column>,
    /// What the columns read of each session, each once.
    reads: Vec<session::Column>,
    now: DateTime<Utc>,
    /// The project's name, for the file name.
    pub project_name: String,
}

/// One batch as read from the database, not yet made text: the rows (only the columns
/// the file shows), the names they refer to, and where the next batch starts (`None`: this
/// was the last).
pub struct Fetched {
    rows: Vec<QueryResult>,
    owners: HashMap<Uuid, String>,
    projects: HashMap<Uuid, String>,
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
            SessionColumnKey::Accelerators => columns.extend(accelerators.iter().cloned().map(Column::Accelerator)),
            SessionColumnKey::Elapsed => columns.extend([Column::ElapsedSeconds, Column::ElapsedText]),
            key => columns.push(Column::Key(key)),
        }
    }
    let mut reads: Vec<session::Column> = Vec::new();
    for c in columns.iter().flat_map(Column::reads) {
        if !reads.iter().any(|r| r.as_str() == c.as_str()) {
            reads.push(*c);
        }
    }
    Ok(Export { set, orders: request.orders.clone(), columns, reads, now, project_name: project.name })
}

/// The accelerator slots (every slot but CPU and memory) the agents of `groups` offer, sorted.
async fn accelerator_slots(db: &impl ConnectionTrait, groups: &[String]) -> DomainResult<Vec<String>> {
    let agents = agent::Entity::find()
        .filter(agent::Column::ResourceGroup.is_in(super::padded(groups.iter().cloned())))
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

    /// The rows after `after` (from the start with `None`): at most [`BATCH`], only the
    /// columns the file shows.
    async fn fetch(&self, db: &impl ConnectionTrait, after: Option<SessionPosition>) -> DomainResult<Fetched> {
        use session::Column as C;
        let request = PageRequest { size: BATCH, backward: false, after, before: None };
        let (rows, next) = self.set.next_rows(db, &self.orders, &request, self.now, &self.reads, Ok).await?;
        // Each id once, only when its column is shown.
        let ids = |column: Column, id: C| -> DomainResult<Vec<Uuid>> {
            if !self.columns.contains(&column) {
                return Ok(Vec::new());
            }
            let ids = rows.iter().map(|row| get(row, id)).collect::<DomainResult<BTreeSet<Uuid>>>()?;
            Ok(ids.into_iter().collect())
        };
        let owners: HashMap<Uuid, String> =
            relations::users(db, &ids(Column::Key(SessionColumnKey::Owner), C::OwnerId)?)
                .await?
                .into_iter()
                .map(|(id, u)| (id, u.email))
                .collect();
        let projects: HashMap<Uuid, String> =
            relations::projects(db, &ids(Column::Key(SessionColumnKey::Project), C::ProjectId)?)
                .await?
                .into_iter()
                .map(|(id, p)| (id, p.name))
                .collect();
        Ok(Fetched { rows, owners, projects, next })
    }

    /// The cells of a fetched batch, row by row.
    fn texts(&self, fetched: &Fetched) -> DomainResult<Vec<Vec<String>>> {
        use session::Column as C;
        let reads = |column: C| self.reads.iter().any(|c| c.as_str() == column.as_str());
        let (slots, created, terminated) = (reads(C::RequestedSlots), reads(C::CreatedAt), reads(C::TerminatedAt));
        let mut rows = Vec::with_capacity(fetched.rows.len());
        for row in &fetched.rows {
            // What several cells use, read once.
            let session = Read {
                row,
                requested: if slots {
                    ResourceSlots::from_json(&get(row, C::RequestedSlots)?)?
                } else {
                    Default::default()
                },
                created_at: if created { Some(get(row, C::CreatedAt)?) } else { None },
                terminated_at: if terminated { get(row, C::TerminatedAt)? } else { None },
                owners: &fetched.owners,
                projects: &fetched.projects,
            };
            rows.push(self.columns.iter().map(|c| self.cell(c, &session)).collect::<DomainResult<_>>()?);
        }
        Ok(rows)
    }

    fn cell(&self, column: &Column, s: &Read<'_>) -> DomainResult<String> {
        use session::Column as C;
        let time =
            |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)).unwrap_or_default();
        let elapsed = || -> DomainResult<i64> {
            let created_at = s.created_at.ok_or_else(|| DomainError::invariant("elapsed time without its columns"))?;
            Ok(sessions::elapsed_between(created_at, s.terminated_at, self.now))
        };
        let text = |c: C| -> DomainResult<String> { Ok(get::<Option<String>>(s.row, c)?.unwrap_or_default()) };
        let name = |id: C, names: &HashMap<Uuid, String>| -> DomainResult<String> {
            Ok(names.get(&get(s.row, id)?).cloned().unwrap_or_default())
        };
        use SessionColumnKey as K;
        let key = match column {
            Column::Accelerator(slot) => return Ok(number(s.requested.get(slot))),
            Column::ElapsedSeconds => return Ok(elapsed()?.to_string()),
            Column::ElapsedText => return Ok(elapsed_text(elapsed()?)),
            Column::Key(key) => key,
        };
        Ok(match key {
            K::Name => text(C::Name)?,
            K::Status => text(C::Status)?,
            K::Accelerators | K::Elapsed => {
                return Err(DomainError::invariant(format!("{key} is made of several columns")));
            }
            K::Cpu => number(s.requested.get(slots::CPU)),
            K::Memory => gib(s.requested.get(slots::MEM)),
            K::Type => text(C::SessionType)?,
            K::Image => text(C::Image)?,
            K::ResourceGroup => text(C::ResourceGroup)?,
            K::Owner => name(C::OwnerId, s.owners)?,
            K::Project => name(C::ProjectId, s.projects)?,
            K::CreatedAt => time(s.created_at),
            K::StartedAt => time(get(s.row, C::StartedAt)?),
            K::TerminatedAt => time(s.terminated_at),
            K::ClusterSize => get::<i32>(s.row, C::ClusterSize)?.to_string(),
            K::StatusInfo => text(C::StatusInfo)?,
            K::Result => text(C::Result)?,
            K::Agent => text(C::AgentId)?,
            K::Priority => get::<i32>(s.row, C::Priority)?.to_string(),
            K::QueuePosition => sessions::queue_position_of(&text(C::Status)?, get(s.row, C::QueuePosition)?)?
                .map(|p| p.to_string())
                .unwrap_or_default(),
        })
    }
}

/// One session as an export reads it: the row of the columns it shows, what several cells
/// use (its requested resources, creation and termination), and the names of owners and
/// projects.
struct Read<'a> {
    row: &'a QueryResult,
    requested: ResourceSlots,
    created_at: Option<DateTime<Utc>>,
    terminated_at: Option<DateTime<Utc>>,
    owners: &'a HashMap<Uuid, String>,
    projects: &'a HashMap<Uuid, String>,
}

/// A column of a session's row.
fn get<T: TryGetable>(row: &QueryResult, column: session::Column) -> DomainResult<T> {
    Ok(row.try_get("", column.as_str())?)
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

const KEY_NAME: &str = "export-links";

/// The server's link-signing key: generated on first start (or first use) and stored, so
/// every replica and every restart shares it.
pub async fn signing_key(db: &impl ConnectionTrait) -> DomainResult<Vec<u8>> {
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

    #[test]
    fn gibibytes_with_two_decimals() {
        let g = f64::from(1u32 << 30);
        for (bytes, text) in [(g, "1.00"), (g / 2.0, "0.50"), (0.0, "0.00"), (1e9, "0.93"), (64.0 * g, "64.00")] {
            assert_eq!(gib(bytes), text);
            assert_eq!(gib(bytes), format!("{:.2}", bytes / g), "the fast path formats as the slow one");
        }
    }
}
