//! API types that several areas share: vocabularies, slots, pending reasons, page info.
//! Area files import these (and lower areas), never each other in a circle.

use async_graphql::{Enum, Object, SimpleObject};

use crate::domain::occupancy;
use crate::domain::paging::Page;
use crate::domain::slots::{self, ResourceSlots as Slots};

use super::scalars::BigInt;

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionType", remote = "crate::domain::model::SessionType")]
pub enum SessionType {
    Interactive,
    Batch,
    Inference,
    Upload,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionStatus", remote = "crate::domain::status::SessionStatus")]
pub enum SessionStatus {
    Pending,
    Scheduled,
    Preparing,
    Pulling,
    Prepared,
    Creating,
    Running,
    Terminating,
    Terminated,
    Cancelled,
    Error,
}

/// Why a running session will be reclaimed.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "ExpiryReason", remote = "crate::domain::expiry::ExpiryReason")]
pub enum ExpiryReason {
    /// The end of the lifetime its keypair's policy gives it (`maxSessionLifetimeSeconds`),
    /// counted from its start, plus what extensions added.
    Lifetime,
    /// A batch session's timeout (`batchTimeoutSeconds`): it is stopped with exit code 124.
    BatchTimeout,
    /// No activity for its keypair policy's `idleTimeoutSeconds` (see `Session.idleChecks`).
    Idle,
}

/// What an idle check measures.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "IdleCheckKind", remote = "crate::domain::idle::IdleCheckKind")]
pub enum IdleCheckKind {
    /// A slot's use against its threshold (`idleUtilization`): at or above it is activity.
    Utilization,
    /// Input into the session's terminal (`idleCountsTerminal`).
    Terminal,
}

/// One idle check of a running interactive session, as it stands. The checks share one
/// timer: activity seen by any of them resets it.
#[derive(SimpleObject)]
#[graphql(serial)]
pub struct IdleCheck {
    pub check: IdleCheckKind,
    /// The slot a utilization check measures.
    pub slot: Option<String>,
    /// What it measured: the slot's use at the latest sample (cpu in cores, mem in bytes);
    /// for the terminal, seconds since the last input. Null before anything was measured.
    pub measured: Option<f64>,
    /// The use at or above which the session is active (utilization checks).
    pub threshold: Option<f64>,
    /// Whether it sees activity now.
    pub active: bool,
    /// Seconds until the session is reclaimed as idle, unless something is active.
    pub remaining_seconds: i64,
}

impl From<crate::domain::idle::IdleCheck> for IdleCheck {
    fn from(c: crate::domain::idle::IdleCheck) -> Self {
        Self {
            check: c.kind.into(),
            slot: c.slot,
            measured: c.measured,
            threshold: c.threshold,
            active: c.active,
            remaining_seconds: c.remaining_seconds,
        }
    }
}

/// What a session's event says.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionEventKind", remote = "crate::domain::events::EventKind")]
pub enum SessionEventKind {
    /// Its status changed from `fromStatus` to `toStatus`.
    StatusChange,
    /// It will be reclaimed soon (see `session { expiry }`); its status stays, and the
    /// reason says when and why.
    ExpiryWarning,
    /// Something other than its status changed: its name, its priority, its lifetime (an
    /// extension) or its idle exemption. The status stays; the reason says what changed and
    /// who changed it, and `session` is as it now is.
    Modified,
    /// Its image's pull went on: `session { pull }` says how far (at most one a second per
    /// session; its status, PULLING, stays).
    PullProgress,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionResult", remote = "crate::domain::status::SessionResult")]
pub enum SessionResult {
    Undefined,
    Success,
    Failure,
}

/// Which limit a figure or a pending reason is about.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::occupancy::LimitLayer")]
pub enum LimitLayer {
    Keypair,
    Project,
    Domain,
    ResourceGroup,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "ResourcePanelView", remote = "crate::domain::model::ResourcePanelView")]
pub enum ResourcePanelView {
    MyTotal,
    MyInResourceGroup,
    TotalInResourceGroup,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionColumnKey", remote = "crate::domain::model::SessionColumnKey")]
pub enum SessionColumnKey {
    Name,
    Status,
    Accelerators,
    Cpu,
    Memory,
    Elapsed,
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
    /// When a running session will be reclaimed, and why.
    Expiry,
    /// What a session really uses now: CPU (cores busy) and memory.
    Utilization,
    /// Who made its latest status change (`Session.statusChangedBy`).
    StatusChangedBy,
    /// The folders it mounts (`Session.mounts`).
    Mounts,
}

#[derive(SimpleObject)]
#[graphql(serial)]
pub struct PageInfo {
    pub has_next_page: bool,
    pub has_previous_page: bool,
    pub start_cursor: Option<String>,
    pub end_cursor: Option<String>,
}

impl PageInfo {
    /// The page info of a domain page whose rows became `edges`, each with its cursor.
    pub fn of<T, E>(page: &Page<T>, edges: &[E], cursor: impl Fn(&E) -> String) -> Self {
        PageInfo {
            has_next_page: page.has_next_page,
            has_previous_page: page.has_previous_page,
            start_cursor: edges.first().map(&cursor),
            end_cursor: edges.last().map(&cursor),
        }
    }
}

/// What a session really uses of one slot, as its engine samples it: cpu in cores busy,
/// mem in bytes, accelerators in their units.
#[derive(SimpleObject)]
#[graphql(serial)]
pub struct SlotUse {
    pub slot: String,
    /// At the latest sample (`utilizationSampledAt`).
    pub current: f64,
    /// Over every sample since it started.
    pub average: f64,
    pub maximum: f64,
}

/// What a session used at one moment of its last hour: a point of a sparkline.
#[derive(SimpleObject)]
#[graphql(serial)]
pub struct UtilizationPoint {
    pub at: chrono::DateTime<chrono::Utc>,
    /// Per slot (cpu first, then mem): cpu in cores busy, mem in bytes.
    pub utilization: Vec<SlotAmount>,
}

impl From<crate::domain::usage::Point> for UtilizationPoint {
    fn from(p: crate::domain::usage::Point) -> Self {
        Self { at: p.at, utilization: p.uses.into_iter().map(|(slot, amount)| SlotAmount { slot, amount }).collect() }
    }
}

impl From<crate::domain::usage::SlotUse> for SlotUse {
    fn from(u: crate::domain::usage::SlotUse) -> Self {
        Self { slot: u.slot, current: u.current, average: u.average, maximum: u.maximum }
    }
}

#[derive(SimpleObject)]
#[graphql(serial)]
pub struct SlotAmount {
    pub slot: String,
    pub amount: f64,
}

impl SlotAmount {
    pub fn list(slots: &Slots) -> Vec<SlotAmount> {
        slots.iter().map(|(slot, amount)| SlotAmount { slot: slot.to_owned(), amount }).collect()
    }
}

/// Resource slots: CPU cores, memory in bytes, accelerators by slot name, and every slot.
pub struct ResourceSlots(pub Slots);

impl ResourceSlots {
    /// `memory`: whole bytes (the compiled list writes it too).
    pub(super) fn memory_of(slots: &Slots) -> BigInt {
        BigInt(slots.get(slots::MEM).round() as i64)
    }

    /// `accelerators` (the compiled list writes them too).
    pub(super) fn accelerators_of(slots: &Slots) -> Vec<SlotAmount> {
        slots
            .iter()
            .filter(|(s, _)| *s != slots::CPU && *s != slots::MEM)
            .map(|(slot, amount)| SlotAmount { slot: slot.to_owned(), amount })
            .collect()
    }
}

#[Object(serial)]
impl ResourceSlots {
    async fn cpu(&self) -> f64 {
        self.0.get(slots::CPU)
    }
    /// Bytes.
    async fn memory(&self) -> BigInt {
        Self::memory_of(&self.0)
    }
    /// Every slot but `cpu` and `mem`, e.g. `cuda.device`.
    async fn accelerators(&self) -> Vec<SlotAmount> {
        Self::accelerators_of(&self.0)
    }
    async fn all(&self) -> Vec<SlotAmount> {
        SlotAmount::list(&self.0)
    }
}

/// Why a pending session is not running yet; `code` is stable, the rest its parameters.
#[derive(SimpleObject)]
pub struct PendingReason {
    pub code: String,
    pub message: String,
    pub layer: Option<LimitLayer>,
    pub slot: Option<String>,
    pub requested: Option<f64>,
    pub remaining: Option<f64>,
}

impl From<occupancy::PendingReason> for PendingReason {
    fn from(r: occupancy::PendingReason) -> Self {
        PendingReason {
            code: r.code.to_owned(),
            message: r.message,
            layer: r.layer.map(Into::into),
            slot: r.slot,
            requested: r.requested,
            remaining: r.remaining,
        }
    }
}
