//! API types that several areas share: vocabularies, slots, pending reasons, page info.
//! Area files import these (and lower areas), never each other in a circle.

use async_graphql::{Enum, Object, SimpleObject};

use crate::domain::model::slots::{self, ResourceSlots as Slots};
use crate::domain::store::paging::Page;
use crate::domain::{DomainError, DomainResult, sessions::occupancy};

use super::scalars::BigInt;

/// What kind of work a session does; fixed at launch.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionType", remote = "crate::domain::model::SessionType")]
pub enum SessionType {
    /// Used by hand: it runs its image's command until it is ended, offers a terminal and
    /// web apps, and is under idle checks.
    Interactive,
    /// Runs its `startupCommand` to the end; it may have a start time, dependencies and a
    /// timeout.
    Batch,
    /// For serving a model: it runs its image's command until it is ended (no terminal, web
    /// apps or idle checks).
    Inference,
    /// For moving files: it runs its image's command until it is ended (no terminal, web
    /// apps or idle checks).
    Upload,
}

/// Where a session is in its lifecycle. It moves forward only: PENDING → SCHEDULED →
/// PREPARING → (PULLING →) PREPARED → CREATING → RUNNING → TERMINATING → TERMINATED, or
/// ends CANCELLED or in ERROR; a terminal status never changes again.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionStatus", remote = "crate::domain::model::status::SessionStatus")]
pub enum SessionStatus {
    /// Waiting to be scheduled: for room, a quota, its start time or its dependencies (see
    /// `pendingReasons`). It holds no resources yet.
    Pending,
    /// Given an agent, whose resources it holds from now until it ends. A Slurm job may
    /// still wait in Slurm's queue.
    Scheduled,
    /// Its agent is preparing its environment.
    Preparing,
    /// Its image is being pulled onto its agent (see `pull`).
    Pulling,
    /// Its image and environment are ready on its agent.
    Prepared,
    /// Its containers are being created and started.
    Creating,
    /// It runs; its applications are offered.
    Running,
    /// Asked to end (by a user or a rule); its engine is stopping it.
    Terminating,
    /// Ended after it was scheduled: on its own, on request, by a timeout, or reclaimed.
    /// See `result`. Terminal.
    Terminated,
    /// Ended before it started: cancelled while PENDING by a user, its pending timeout, or
    /// a dependency that failed. Terminal.
    Cancelled,
    /// It failed to start, or its machine failed under it. Terminal.
    Error,
}

/// Why a running session will be reclaimed.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "ExpiryReason", remote = "crate::domain::reclaim::expiry::ExpiryReason")]
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
#[graphql(name = "IdleCheckKind", remote = "crate::domain::reclaim::idle::IdleCheckKind")]
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
    /// What this check watches: a slot's use, or the terminal.
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

impl From<crate::domain::reclaim::idle::IdleCheck> for IdleCheck {
    fn from(c: crate::domain::reclaim::idle::IdleCheck) -> Self {
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
#[graphql(name = "SessionEventKind", remote = "crate::domain::live::events::EventKind")]
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

/// How a session's work came out, once it ended.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionResult", remote = "crate::domain::model::status::SessionResult")]
pub enum SessionResult {
    /// Not known: the session has not ended, or ended without an outcome (cancelled, or
    /// forced to end before its engine reported one).
    Undefined,
    /// It ended well: its command exited with code 0, or a session other than a batch one
    /// was stopped on request.
    Success,
    /// It failed: a non-zero exit code, a failed start, a timeout, out of memory or disk,
    /// a lost machine, or a batch session stopped before it finished.
    Failure,
}

/// Which limit a figure or a pending reason is about.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::sessions::occupancy::LimitLayer")]
pub enum LimitLayer {
    /// The limits of the policy of the keypair the sessions were launched with (and its
    /// number of sessions running at once).
    Keypair,
    /// The limits of the session's project.
    Project,
    /// The limits of the project's domain.
    Domain,
    /// The capacity of the resource group: what its live agents that take sessions have.
    ResourceGroup,
}

/// Which resource summary the Sessions page shows.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "ResourcePanelView", remote = "crate::domain::model::ResourcePanelView")]
pub enum ResourcePanelView {
    /// What the viewer's sessions hold in every resource group, against the keypair,
    /// project and domain limits.
    MyTotal,
    /// What the viewer's sessions hold in one resource group, against those limits and
    /// what the group has left.
    MyInResourceGroup,
    /// What everyone's sessions hold in one resource group, against its capacity.
    TotalInResourceGroup,
}

/// A column of the session table. NAME, STATUS, ACCELERATORS, CPU, MEMORY and ELAPSED show
/// unless hidden; the others show once made visible.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "SessionColumnKey", remote = "crate::domain::model::SessionColumnKey")]
pub enum SessionColumnKey {
    /// The session's name; it cannot be hidden.
    Name,
    /// Its status (`Session.status`).
    Status,
    /// The accelerators it requests (`requestedSlots.accelerators`).
    Accelerators,
    /// The CPU cores it requests (`requestedSlots.cpu`).
    Cpu,
    /// The memory it requests (`requestedSlots.memory`).
    Memory,
    /// How long it has existed (`Session.elapsedSeconds`).
    Elapsed,
    /// Its kind (`Session.type`).
    Type,
    /// The image it runs.
    Image,
    /// The resource group it runs in.
    ResourceGroup,
    /// Who launched it; shown right after NAME in a list of everyone's sessions.
    Owner,
    /// Its project.
    Project,
    /// When it was launched.
    CreatedAt,
    /// When it started running.
    StartedAt,
    /// When it ended.
    TerminatedAt,
    /// How many containers it has.
    ClusterSize,
    /// Why its status last changed (`Session.statusInfo`).
    StatusInfo,
    /// How it ended (`Session.result`).
    Result,
    /// The agent it runs on.
    Agent,
    /// Its scheduling priority.
    Priority,
    /// Its place in the queue while it waits (`Session.queuePosition`).
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

/// Where a page stands in its list, and the cursors to ask for its neighbours.
#[derive(SimpleObject)]
#[graphql(serial)]
pub struct PageInfo {
    /// Whether rows follow this page. Reading backwards (`last`/`before`): true when
    /// `before` was given.
    pub has_next_page: bool,
    /// Whether rows come before this page. Reading forwards: true when `after` was given.
    pub has_previous_page: bool,
    /// The cursor of the page's first row, for `before`; null for an empty page.
    pub start_cursor: Option<String>,
    /// The cursor of the page's last row, for `after`; null for an empty page.
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
    /// The slot's name, e.g. `cpu`, `mem`.
    pub slot: String,
    /// At the latest sample (`utilizationSampledAt`).
    pub current: f64,
    /// Over every sample since it started.
    pub average: f64,
    /// The highest of every sample since it started.
    pub maximum: f64,
}

/// What a session used at one moment of its last hour: a point of a sparkline.
#[derive(SimpleObject)]
#[graphql(serial)]
pub struct UtilizationPoint {
    /// When this point was sampled (RFC 3339, UTC).
    pub at: chrono::DateTime<chrono::Utc>,
    /// Per slot (cpu first, then mem): cpu in cores busy, mem in bytes.
    pub utilization: Vec<SlotAmount>,
}

impl From<crate::domain::live::usage::Point> for UtilizationPoint {
    fn from(p: crate::domain::live::usage::Point) -> Self {
        Self { at: p.at, utilization: p.uses.into_iter().map(|(slot, amount)| SlotAmount { slot, amount }).collect() }
    }
}

impl From<crate::domain::live::usage::SlotUse> for SlotUse {
    fn from(u: crate::domain::live::usage::SlotUse) -> Self {
        Self { slot: u.slot, current: u.current, average: u.average, maximum: u.maximum }
    }
}

/// An amount of one resource slot.
#[derive(SimpleObject)]
#[graphql(serial)]
pub struct SlotAmount {
    /// The slot's name: `cpu`, `mem`, or an accelerator's such as `cuda.device`.
    pub slot: String,
    /// In the slot's unit: cores for `cpu`, bytes for `mem`, devices or shares for an
    /// accelerator.
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

/// Amounts of resource slots: CPU cores, memory in bytes, accelerators, and every slot.
#[Object(serial)]
impl ResourceSlots {
    /// CPU cores (0 when the slot is absent).
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
    /// Every slot present, `cpu` and `mem` (in bytes) included, by slot name.
    async fn all(&self) -> Vec<SlotAmount> {
        SlotAmount::list(&self.0)
    }
}

/// Why a pending session waits: the scheduler's reasons, then those of a session waiting
/// in its engine (it does not answer, or Slurm's reason).
#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum PendingReasonCode {
    /// A batch session set to start later (`startsAt`): it waits for that time.
    NotYet,
    /// It waits for sessions it depends on (`dependsOn`) to end (the scheduler's), or
    /// Slurm holds the job for its dependencies.
    Dependency,
    /// It would take a limit's layer (`layer`) past its limit of `slot`.
    QuotaExceeded,
    /// Its layer already runs as many sessions as it may at once.
    ConcurrencyLimit,
    /// No agent of its resource group has room for it now.
    NoCapacity,
    /// Sessions ahead of it in the queue go first (the group's strategy keeps the order).
    QueuedBehind,
    /// Scheduled, but its engine does not answer.
    EngineUnreachable,
    /// Slurm: the nodes the job needs are busy.
    InsufficientResources,
    /// Slurm: jobs of a higher priority go first.
    Priority,
    /// Slurm: the nodes it needs are down, drained or reserved.
    NodesUnavailable,
    /// Slurm: its partition is down or inactive.
    PartitionDown,
    /// Slurm: the job waits for its begin time.
    BeginTime,
    /// Slurm: the job is held by its user or an administrator.
    Held,
    /// Slurm: a limit of its quality of service.
    QosLimit,
    /// Slurm: a limit of its association (account or user).
    AssociationLimit,
    /// Slurm: another reason, given in `message`.
    SlurmReason,
}

impl PendingReasonCode {
    /// The code the domain gives, as this enum's value of the same name.
    pub fn of(code: &str) -> DomainResult<Self> {
        named(code)
    }
}

/// The value of enum `T` named `text` (a domain's stored code, the same text): anything else
/// is a broken invariant, never the client's fault.
pub fn named<T: async_graphql::resolver_utils::EnumType>(text: &str) -> DomainResult<T> {
    let found = T::items().iter().find(|item| item.name == text).map(|item| item.value);
    found.ok_or_else(|| DomainError::invariant(format!("the code `{text}` has no value in the API's enum")))
}

/// Why a pending session is not running yet; `code` is stable, the rest its parameters.
#[derive(SimpleObject)]
pub struct PendingReason {
    /// The reason, as a stable code.
    pub code: PendingReasonCode,
    /// The reason in words, with its figures, for people.
    pub message: String,
    /// The limit it is about (QUOTA_EXCEEDED, CONCURRENCY_LIMIT, NO_CAPACITY); null
    /// otherwise.
    pub layer: Option<LimitLayer>,
    /// The slot over its limit (QUOTA_EXCEEDED); null otherwise.
    pub slot: Option<String>,
    /// What the session asks for of `slot` (for CONCURRENCY_LIMIT: 1 session); null when
    /// not about an amount.
    pub requested: Option<f64>,
    /// What the layer has left of `slot` (for CONCURRENCY_LIMIT: sessions); null when not
    /// about an amount.
    pub remaining: Option<f64>,
}

impl TryFrom<occupancy::PendingReason> for PendingReason {
    type Error = DomainError;

    fn try_from(r: occupancy::PendingReason) -> DomainResult<Self> {
        Ok(PendingReason {
            code: PendingReasonCode::of(r.code)?,
            message: r.message,
            layer: r.layer.map(Into::into),
            slot: r.slot,
            requested: r.requested,
            remaining: r.remaining,
        })
    }
}

#[cfg(test)]
mod pending_code_tests {
    use super::*;

    #[test]
    fn every_pending_reason_code_of_the_domain_is_one_of_the_apis() {
        for code in occupancy::PENDING_CODES {
            assert!(PendingReasonCode::of(code).is_ok(), "{code}");
        }
        assert!(PendingReasonCode::of("NOPE").is_err());
    }
}
