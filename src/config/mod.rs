//! Every command-line flag of sessiond, each with an environment variable and a safe default.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod limits;
pub use limits::{GraphqlLimits, HttpLimits, ShareLimits, WsLimits};

#[derive(Debug, Parser)]
#[command(
    name = "sessiond",
    version,
    about = "GraphQL API server behind the Sessions page of a compute-session platform"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// How log lines are written on stderr: `text` (plain, coloured only on a terminal) or
    /// `json` (one JSON object per line, for a log collector).
    #[arg(long, global = true, value_enum, env = "SESSIOND_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Migrate the database and serve the API.
    Serve(Box<ServeArgs>),
    /// Apply pending migrations and exit.
    Migrate(DbArgs),
    /// Print the GraphQL schema (SDL), sorted; `schema.graphql` must equal it.
    Schema,
    /// Add realistic generated sessions to a demo database (seeding the demo data first
    /// when the database is empty), for benchmarks and trials.
    Generate {
        #[command(flatten)]
        db: DbArgs,
        /// How many sessions to add.
        #[arg(long, env = "SESSIOND_GENERATE_SESSIONS")]
        sessions: u64,
        /// The same seed gives the same sessions (relative to the current time).
        #[arg(long, env = "SESSIOND_GENERATE_SEED", default_value_t = 1)]
        seed: u64,
    },
    /// Make the database hold the domains, projects, users, keypair policies, resource
    /// groups, agents and images a declaration declares (TOML; see `demo.toml`). Prints the
    /// plan, then applies it in one transaction.
    Apply {
        #[command(flatten)]
        db: DbArgs,
        /// A declaration file, or a directory whose `*.toml` files are read as one.
        #[arg(short = 'f', long = "file", required_unless_present = "explain")]
        file: Option<PathBuf>,
        /// Print every section and key a declaration file may hold (type, default,
        /// meaning) and exit.
        #[arg(long, conflicts_with_all = ["file", "dry_run", "prune"])]
        explain: bool,
        /// Print the plan and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Delete what is stored but not declared (refused for what live sessions use).
        #[arg(long)]
        prune: bool,
        /// The user (a SUPERADMIN, by e-mail) making the change: named in the history of
        /// each live session whose lifetime or idle checks it changes. Without it the
        /// system is, by the rule `apply`.
        #[arg(long = "as", value_name = "EMAIL", env = "SESSIOND_APPLY_AS")]
        as_user: Option<String>,
    },
    /// The images pulled onto this machine (its store, under the runtime directory).
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Own one session's sandbox until it ends (the local runtime starts it; reports
    /// through the files of the session's directory).
    #[command(hide = true)]
    Supervise {
        /// The session's directory.
        dir: PathBuf,
    },
    /// Hands the server sockets made in a running session's network namespace (internal:
    /// started by the server to reach the session's apps; its standard input is the line).
    #[command(hide = true)]
    Dial {
        /// The host pid of the sandbox's init.
        #[arg(long)]
        pid: u32,
        /// Its start time (clock ticks after boot), checked: a pid may be reused.
        #[arg(long)]
        started: u64,
    },
    /// Run a program (bubblewrap) in a user namespace of its own, its user's ids mapped to
    /// themselves (internal: an unprivileged supervisor's sandbox starts so, for its apps
    /// and terminal to be reached; see `domain::runtime::local::enter`).
    #[command(hide = true)]
    Userns {
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Run a program inside a running session's sandbox, confined as its processes are (the
    /// terminal's shell starts so).
    #[command(hide = true)]
    Enter {
        /// The host pid of the sandbox's init.
        #[arg(long)]
        pid: u32,
        /// Its start time (clock ticks after boot), checked: a pid may be reused.
        #[arg(long)]
        started: u64,
        /// A `cgroup.procs` file of the session's cgroups to join first.
        #[arg(long)]
        join: Vec<PathBuf>,
        /// The largest file the program may write (bytes).
        #[arg(long)]
        max_file: u64,
        /// Where no cgroup limits the session: the cores the program is pinned to.
        #[arg(long)]
        watchdog_cores: Option<u32>,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// List them: digest, reference, size, last use, and whether a session runs it now.
    Ls {
        #[arg(long, env = "SESSIOND_RUNTIME_DIR", default_value = crate::domain::runtime::local::machine::DEFAULT_RUNTIME_DIR)]
        runtime_dir: PathBuf,
    },
    /// Pull an image into the store now (to warm a machine before its sessions need it):
    /// `HOST[:PORT]/REPOSITORY:TAG` or `…@sha256:…`, from the registry the flags describe
    /// (anonymous HTTPS without them).
    Pull {
        reference: String,
        #[arg(long, env = "SESSIOND_RUNTIME_DIR", default_value = crate::domain::runtime::local::machine::DEFAULT_RUNTIME_DIR)]
        runtime_dir: PathBuf,
        /// The registry's URL (as `[registries.NAME] url`).
        #[arg(long)]
        registry_url: Option<String>,
        /// Plain HTTP, on a loopback address only.
        #[arg(long, requires = "registry_url")]
        insecure: bool,
        #[arg(long, requires = "password_file")]
        username: Option<String>,
        #[arg(long, requires = "username")]
        password_file: Option<PathBuf>,
        #[arg(long, conflicts_with = "username")]
        token_file: Option<PathBuf>,
        #[arg(long, env = "SESSIOND_IMAGE_CACHE_LIMIT", default_value_t = crate::domain::runtime::environments::DEFAULT_IMAGE_CACHE_LIMIT)]
        image_cache_limit: u64,
    },
    /// Load the images of a file into the store, without a registry (an air-gapped site):
    /// an OCI image layout (a directory, or its tar) or a `docker save` archive, plain,
    /// gzip or zstd. Each image is known by the references the file names it by
    /// (`docker save`'s tags, a layout's `io.containerd.image.name`), and by `--as`.
    Import {
        file: PathBuf,
        /// A reference the image is known by too, whole as a session's image resolves it
        /// (`HOST[:PORT]/REPOSITORY:TAG`, the host a declared registry's): for a file of
        /// one image. May be given more than once.
        #[arg(long = "as", value_name = "REFERENCE")]
        names: Vec<String>,
        #[arg(long, env = "SESSIOND_RUNTIME_DIR", default_value = crate::domain::runtime::local::machine::DEFAULT_RUNTIME_DIR)]
        runtime_dir: PathBuf,
        #[arg(long, env = "SESSIOND_IMAGE_CACHE_LIMIT", default_value_t = crate::domain::runtime::environments::DEFAULT_IMAGE_CACHE_LIMIT)]
        image_cache_limit: u64,
    },
    /// Remove every image no session runs now (with the blobs no image left needs).
    Prune {
        #[arg(long, env = "SESSIOND_RUNTIME_DIR", default_value = crate::domain::runtime::local::machine::DEFAULT_RUNTIME_DIR)]
        runtime_dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a keypair for a user and print its token once (only a hash is kept).
    Create {
        #[command(flatten)]
        db: DbArgs,
        /// Email of the user the token authenticates.
        #[arg(long)]
        email: String,
        /// Keypair resource policy; defaults to the user's current one, else `default`.
        #[arg(long)]
        policy: Option<String>,
    },
    /// List a user's tokens by access key, with policy, state and creation time (secrets
    /// are never stored, so never shown).
    List {
        #[command(flatten)]
        db: DbArgs,
        /// Email of the user.
        #[arg(long)]
        email: String,
    },
    /// Revoke a token by its access key: it authenticates no more.
    Revoke {
        #[command(flatten)]
        db: DbArgs,
        /// The access key `token create` and `token list` print.
        #[arg(long)]
        access_key: String,
    },
}

#[derive(Clone, Debug, Args)]
pub struct DbArgs {
    /// `sqlite://FILE?mode=rwc` (embedded) or `postgres://USER@HOST/DB` (production).
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://sessiond.db?mode=rwc")]
    pub database_url: String,
    /// Size of the connection pool.
    #[arg(long, env = "SESSIOND_DB_MAX_CONNECTIONS", default_value_t = 8)]
    pub db_max_connections: u32,
    /// How long a request waits for a database connection (the pool busy, or the database
    /// out of reach) before it is answered `UNAVAILABLE` (503).
    #[arg(long, env = "SESSIOND_DB_ACQUIRE_TIMEOUT_MS", default_value_t = 5_000)]
    pub db_acquire_timeout_ms: u64,
    /// Prepared statements each pooled connection keeps (least recently used dropped). The
    /// hot ones are few; lists of varying length make many rare ones, and at 100 per
    /// connection they held ~45 MiB after a load.
    #[arg(long, env = "SESSIOND_DB_STATEMENT_CACHE", default_value_t = DEFAULT_STATEMENT_CACHE)]
    pub db_statement_cache: usize,
    /// A request connection idle this long is closed (one stays open), and with it its
    /// statement and page caches: after a burst the server's memory returns. The background
    /// workers keep a connection of their own, so their polling does not keep every pooled
    /// connection warm.
    #[arg(long, env = "SESSIOND_DB_IDLE_TIMEOUT_MS", default_value_t = DEFAULT_IDLE_TIMEOUT_MS)]
    pub db_idle_timeout_ms: u64,
}

pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 20_000;

pub const DEFAULT_STATEMENT_CACHE: usize = 24;

impl DbArgs {
    /// These settings for the database at `url`.
    pub fn of(url: impl Into<String>) -> Self {
        Self {
            database_url: url.into(),
            db_max_connections: 8,
            db_acquire_timeout_ms: 5_000,
            db_statement_cache: DEFAULT_STATEMENT_CACHE,
            db_idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
        }
    }
}

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Address to listen on.
    #[arg(long, env = "SESSIOND_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Address the sessions' apps are served on: an origin of their own, never the page's
    /// or the API's (an app runs its user's code). Default: `--bind`'s host, a free port.
    #[arg(long, env = "SESSIOND_APPS_BIND")]
    pub apps_bind: Option<SocketAddr>,
    /// The apps' public address, when a reverse proxy stands before `--apps-bind` (e.g.
    /// `https://apps.example.org`); default: `http://` and the address it listens on.
    #[arg(long, env = "SESSIOND_APPS_URL", value_parser = apps_url)]
    pub apps_url: Option<String>,
    /// Seed the demo domains, projects, users, tokens, resource groups, agents and images
    /// when the database is empty. The demo tokens are public: for trying sessiond out only.
    #[arg(long, env = "SESSIOND_DEMO")]
    pub demo: bool,
    #[command(flatten)]
    pub http: HttpLimits,
    #[command(flatten)]
    pub timings: Timings,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    #[command(flatten)]
    pub retention: RetentionArgs,
    #[command(flatten)]
    pub callbacks: CallbackArgs,
    /// Most sessions one "Launch Multiple Sessions" may create (at most 1000: one batch is
    /// one insert statement per table).
    #[arg(long, env = "SESSIOND_MAX_LAUNCH_COUNT", default_value_t = DEFAULT_MAX_LAUNCH_COUNT, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_launch_count: u32,
    /// Most folders one launch mounts.
    #[arg(long, env = "SESSIOND_MAX_MOUNTS", default_value_t = crate::domain::storage::mounts::DEFAULT_MAX_MOUNTS, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub max_mounts: u32,
}

pub const DEFAULT_MAX_LAUNCH_COUNT: u32 = 100;

/// What runs sessions on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeChoice {
    /// The local runtime when a sandbox can start here, else the simulated one (the log
    /// and `Query.runtime` say which, and why).
    Auto,
    /// Sessions really run here; the server does not start if they cannot.
    Local,
    /// Nothing runs: sessions walk through their statuses on timers.
    Simulated,
}

#[derive(Clone, Debug, Args)]
pub struct RuntimeArgs {
    /// What runs sessions on this machine. Every agent other than this machine is simulated.
    #[arg(long = "runtime", env = "SESSIOND_RUNTIME", value_enum, default_value_t = RuntimeChoice::Auto)]
    pub choice: RuntimeChoice,
    /// Image → local environment: the `[images]` section of a declaration file (see
    /// `demo.toml`). Its entries win over the environments stored with the images by
    /// `sessiond apply`; an image with neither runs on the host's read-only system directories.
    #[arg(long, env = "SESSIOND_IMAGES_FILE")]
    pub images_file: Option<PathBuf>,
    /// Where the local runtime keeps each session's directory (spec, state, output, work).
    #[arg(long, env = "SESSIOND_RUNTIME_DIR", default_value = crate::domain::runtime::local::machine::DEFAULT_RUNTIME_DIR)]
    pub runtime_dir: PathBuf,
    /// This machine's agent id.
    #[arg(long, env = "SESSIOND_LOCAL_AGENT", default_value = "local")]
    pub local_agent: String,
    /// The resource group of this machine's agent (created, open to every project, when new).
    #[arg(long, env = "SESSIOND_LOCAL_RESOURCE_GROUP", default_value = "local")]
    pub local_resource_group: String,
    /// Between SIGTERM to a session's processes and killing whatever is left.
    #[arg(long, env = "SESSIOND_TERMINATE_GRACE_MS", default_value_t = 5_000)]
    pub terminate_grace_ms: u64,
    /// Bytes each session's work directory may hold (no larger file may be written; a
    /// session past it is ended with "disk limit exceeded").
    #[arg(long, env = "SESSIOND_WORK_DIR_LIMIT", default_value_t = crate::domain::runtime::local::limits::DEFAULT_WORK_DIR_LIMIT)]
    pub work_dir_limit: u64,
    /// Bytes the machine's store of pulled images may hold (an image larger than this fails
    /// to pull, with that reason).
    #[arg(long, env = "SESSIOND_IMAGE_CACHE_LIMIT", default_value_t = crate::domain::runtime::environments::DEFAULT_IMAGE_CACHE_LIMIT)]
    pub image_cache_limit: u64,
}

impl Default for RuntimeArgs {
    fn default() -> Self {
        Self {
            choice: RuntimeChoice::Simulated,
            images_file: None,
            runtime_dir: PathBuf::from(crate::domain::runtime::local::machine::DEFAULT_RUNTIME_DIR),
            local_agent: "local".to_owned(),
            local_resource_group: "local".to_owned(),
            terminate_grace_ms: 5_000,
            work_dir_limit: crate::domain::runtime::local::limits::DEFAULT_WORK_DIR_LIMIT,
            image_cache_limit: crate::domain::runtime::environments::DEFAULT_IMAGE_CACHE_LIMIT,
        }
    }
}

/// Where completion callbacks may go and how they are delivered.
#[derive(Clone, Debug, Args)]
pub struct CallbackArgs {
    /// Hosts a session's callback URL may name: comma-separated `host[:port]` patterns, `*`
    /// matching one label, no port meaning any. Empty (the default): launches with a
    /// callback URL are refused. A host is called only at public addresses unless a pattern
    /// without `*` names it (e.g. `127.0.0.1:9000` for a receiver on this machine).
    #[arg(long, env = "SESSIOND_CALLBACK_ALLOW", default_value = "", value_parser = parse_allow)]
    pub callback_allow: crate::domain::lifecycle::callbacks::Allow,
    /// Tries of a callback before it is given up (the first included).
    #[arg(long, env = "SESSIOND_CALLBACK_MAX_ATTEMPTS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub callback_max_attempts: u32,
    /// The wait after a callback's first failed try; it doubles after each (at most an hour).
    #[arg(long, env = "SESSIOND_CALLBACK_RETRY_MS", default_value_t = 5_000)]
    pub callback_retry_ms: u64,
    /// A try with no answer within this fails (TIMEOUT) and is retried.
    #[arg(long, env = "SESSIOND_CALLBACK_TIMEOUT_MS", default_value_t = 10_000)]
    pub callback_timeout_ms: u64,
    /// Receivers called at once by this replica.
    #[arg(long, env = "SESSIOND_CALLBACK_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub callback_concurrency: u32,
}

fn parse_allow(text: &str) -> Result<crate::domain::lifecycle::callbacks::Allow, String> {
    crate::domain::lifecycle::callbacks::Allow::parse(text)
}

impl Default for CallbackArgs {
    fn default() -> Self {
        Self {
            callback_allow: Default::default(),
            callback_max_attempts: 10,
            callback_retry_ms: 5_000,
            callback_timeout_ms: 10_000,
            callback_concurrency: 16,
        }
    }
}

impl CallbackArgs {
    /// The deliverer's options.
    pub fn delivery(&self) -> crate::domain::lifecycle::callbacks::deliver::Options {
        use crate::domain::lifecycle::callbacks::{Retry, deliver::Options};
        Options {
            allow: std::sync::Arc::new(self.callback_allow.clone()),
            retry: Retry {
                max_attempts: self.callback_max_attempts,
                base: std::time::Duration::from_millis(self.callback_retry_ms),
            },
            timeout: std::time::Duration::from_millis(self.callback_timeout_ms.max(1)),
            concurrency: self.callback_concurrency as usize,
        }
    }
}

/// How long finished sessions' logs are kept.
#[derive(Clone, Debug, Args)]
pub struct RetentionArgs {
    /// Days a finished session's log is kept after its end; 0 keeps logs for ever.
    #[arg(long, env = "SESSIOND_LOG_RETENTION_DAYS", default_value_t = 30)]
    pub log_retention_days: u32,
    /// Log lines one user's finished sessions keep together (the oldest go first past it);
    /// 0 sets no budget.
    #[arg(long, env = "SESSIOND_LOG_LINES_PER_USER", default_value_t = 1_000_000)]
    pub log_lines_per_user: u64,
}

impl Default for RetentionArgs {
    fn default() -> Self {
        Self { log_retention_days: 30, log_lines_per_user: 1_000_000 }
    }
}

impl RetentionArgs {
    pub fn retention(&self) -> crate::domain::live::logs::Retention {
        crate::domain::live::logs::Retention {
            days: (self.log_retention_days > 0).then_some(self.log_retention_days),
            lines_per_user: (self.log_lines_per_user > 0).then_some(self.log_lines_per_user),
        }
    }
}

/// How fast sessions move: the scheduler's interval and the simulated runtime's delays.
#[derive(Clone, Debug, Args)]
pub struct Timings {
    /// The scheduler runs at once when woken by a launch or a session's end, else this often.
    #[arg(long, env = "SESSIOND_SCHEDULER_INTERVAL_MS", default_value_t = 2000)]
    pub scheduler_interval_ms: u64,
    /// Delay of each start-up step of the simulated runtime.
    #[arg(long, env = "SESSIOND_SIM_STEP_MS", default_value_t = 1000)]
    pub sim_step_ms: u64,
    /// How long a simulated batch session runs before it ends with exit code 0.
    #[arg(long, env = "SESSIOND_SIM_BATCH_MS", default_value_t = 30_000)]
    pub sim_batch_ms: u64,
    /// How long before a running session is reclaimed (its lifetime's end, its batch
    /// timeout) its owner is warned: an EXPIRY_WARNING event and a line of its history.
    #[arg(long, env = "SESSIOND_EXPIRY_WARNING_MS", default_value_t = 900_000)]
    pub expiry_warning_ms: u64,
}

impl Default for Timings {
    fn default() -> Self {
        Self { scheduler_interval_ms: 2000, sim_step_ms: 1000, sim_batch_ms: 30_000, expiry_warning_ms: 900_000 }
    }
}

/// An apps' public address: `http://` or `https://`, a host, no path, query or fragment.
fn apps_url(text: &str) -> Result<String, String> {
    let url = text.trim_end_matches('/');
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("the apps' URL starts with http:// or https://")?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return Err("the apps' URL is a scheme and a host (and port) alone".into());
    }
    Ok(url.to_owned())
}
