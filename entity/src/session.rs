//! The `sessions` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub session_type: String,
    pub status: String,
    pub status_info: Option<String>,
    pub result: String,
    pub exit_code: Option<i32>,
    pub owner_id: Uuid,
    pub keypair_id: Uuid,
    pub project_id: Uuid,
    pub domain_id: Uuid,
    pub resource_group: String,
    pub image: String,
    pub requested_slots: Json,
    pub occupied_slots: Json,
    pub cluster_size: i32,
    pub environment: Json,
    pub startup_command: Option<String>,
    pub batch_timeout_seconds: Option<i64>,
    pub priority: i32,
    pub agent_id: Option<String>,
    pub launch_group_id: Option<Uuid>,
    /// The causes found by the latest scheduling pass, while PENDING.
    pub pending_reasons: Json,
    pub created_at: DateTimeUtc,
    pub scheduled_at: Option<DateTimeUtc>,
    pub started_at: Option<DateTimeUtc>,
    pub terminated_at: Option<DateTimeUtc>,
    pub status_changed_at: DateTimeUtc,
    /// Place among the pending sessions of its group at the latest scheduling pass.
    pub queue_position: Option<i32>,
    /// The lifetime (seconds from its start) its keypair's policy gives it; none: unlimited.
    pub lifetime_seconds: Option<i64>,
    /// What extensions added to its lifetime, in all.
    pub extended_seconds: i64,
    /// How many times it was extended.
    pub extensions: i32,
    /// The expiry its owner was last warned of.
    pub expiry_warned_for: Option<DateTimeUtc>,
    /// Per slot, what it used at the latest sample, on average and at most since it
    /// started: `{"cpu": [current, average, maximum]}` (cores, bytes, units).
    pub utilization: Json,
    /// How many samples the averages are of.
    pub utilization_samples: i32,
    /// When the latest sample was taken.
    pub utilization_sampled_at: Option<DateTimeUtc>,
    /// The idle checks its keypair's policy gives it (`{"timeout_seconds": …,
    /// "utilization": {slot: threshold}, "terminal": bool}`); none: never idle.
    pub idle: Option<Json>,
    /// When it was last seen active: use above a threshold of its idle checks, or an
    /// extension of an idle expiry (then a later instant).
    pub active_at: Option<DateTimeUtc>,
    /// When its owner last typed into its terminal.
    pub typed_at: Option<DateTimeUtc>,
    /// An administrator exempted it from idle checks.
    pub exempt_idle: bool,
    /// Cores it used at its latest sample (0 before any), for ordering.
    #[sea_orm(column_type = "Double")]
    pub cpu_used: f64,
    /// Bytes of memory it used at its latest sample (0 before any), for ordering.
    #[sea_orm(column_type = "Double")]
    pub mem_used: f64,
    /// Who made its latest status change: a user, or (none) the system by `status_actor_rule`.
    pub status_actor_user_id: Option<Uuid>,
    pub status_actor_rule: Option<String>,
    /// The session it was launched again from (`relaunchSession`), and that one's name then.
    pub launched_from_session_id: Option<Uuid>,
    pub launched_from_name: Option<String>,
    /// The template it was launched from, when it was (its name is `launched_from_name`).
    pub launched_from_template_id: Option<Uuid>,
    /// A batch session waits until then (pending reason NOT_YET); none: at once.
    pub starts_at: Option<DateTimeUtc>,
    /// Told of its end (and of its start with `callback_on_running`) by a signed POST.
    #[sea_orm(column_type = "Text", nullable)]
    pub callback_url: Option<String>,
    pub callback_on_running: bool,
    /// A digest of `pending_reasons` (`occupancy::reasons_digest`), written with them: what
    /// the scheduling pass compares. 0: not known.
    pub pending_digest: i64,
    /// How far its image's pull is, while PULLING: `{bytesDone, bytesTotal, layersDone,
    /// layersTotal, at}`.
    pub pull_progress: Option<Json>,
    /// The manifest digest its image's reference resolved to when pulled: what ran.
    pub image_digest: Option<String>,
    /// The folders bound into its sandbox, as launched: `[{folder, name, path, readOnly}]`
    /// (`path` under the work directory); none: no mounts.
    pub mounts: Option<Json>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
