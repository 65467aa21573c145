//! The bounds of what the server accepts and holds: HTTP, GraphQL, WebSocket connections,
//! and each user's share of them.

use clap::Args;

/// Limits of the HTTP surface.
#[derive(Clone, Debug, Args)]
pub struct HttpLimits {
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "SESSIOND_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Largest request body a session's app is sent (an upload), in bytes: streamed, never
    /// held; past it the request is cut and answered 413.
    #[arg(long, env = "SESSIOND_MAX_APP_BODY_BYTES", default_value_t = 1 << 30)]
    pub max_app_body_bytes: usize,
    /// A connection to a session's app through which nothing has passed for this long (an
    /// answer's body stalled, a WebSocket silent both ways) is closed, in seconds.
    #[arg(long, env = "SESSIOND_APP_IDLE_TIMEOUT_SECS", default_value_t = 3600)]
    pub app_idle_timeout_secs: u64,
    /// A GraphQL request that takes longer is answered 408.
    #[arg(long, env = "SESSIOND_REQUEST_TIMEOUT_MS", default_value_t = 30_000)]
    pub request_timeout_ms: u64,
    /// A connection that has not sent a whole request head within this time is closed; so
    /// is a keep-alive connection idle for this long.
    #[arg(long, env = "SESSIOND_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// Open TCP connections at most (WebSockets included); more wait to be accepted. Also
    /// kept under the process's open-file limit.
    #[arg(long, env = "SESSIOND_MAX_CONNECTIONS", default_value_t = 8_192)]
    pub max_connections: usize,
    /// Requests answered at once (health checks and metrics aside); one more is answered
    /// 503 with `Retry-After` at once rather than queued.
    #[arg(long, env = "SESSIOND_MAX_IN_FLIGHT", default_value_t = 512)]
    pub max_in_flight: usize,
    /// Origins (`scheme://host[:port]`) whose pages may call the API from a browser (CORS),
    /// and open its WebSockets; repeat the flag or separate them by commas. Empty (the
    /// default): no cross-origin HTTP, and a WebSocket only from the server's own origin.
    #[arg(long = "cors-origin", env = "SESSIOND_CORS_ORIGIN", value_delimiter = ',')]
    pub cors_origins: Vec<String>,
    #[command(flatten)]
    pub ws: WsLimits,
    #[command(flatten)]
    pub graphql: GraphqlLimits,
    #[command(flatten)]
    pub shares: ShareLimits,
}

impl HttpLimits {
    /// How the live feeds are sized by these limits.
    pub fn live_options(&self) -> crate::domain::live::LiveOptions {
        let s = &self.shares;
        crate::domain::live::LiveOptions {
            buffer: self.ws.subscription_buffer,
            per_user: crate::domain::live::shares::PerUser {
                connections: s.max_ws_connections_per_user,
                subscriptions: s.max_subscriptions_per_user,
                terminals: s.max_terminals_per_user,
                replays: s.max_replays_per_user,
                apps: s.max_app_connections_per_user,
                operations_per_second: s.operations_per_second_per_user,
            },
            replays: crate::domain::live::replay::ReplayBudget {
                connections: s.replay_connections as usize,
                rows_per_second: s.replay_rows_per_second,
            },
        }
    }
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            max_app_body_bytes: 1 << 30,
            app_idle_timeout_secs: 3600,
            request_timeout_ms: 30_000,
            header_read_timeout_ms: 10_000,
            max_connections: 8_192,
            max_in_flight: 512,
            cors_origins: Vec::new(),
            ws: WsLimits::default(),
            graphql: GraphqlLimits::default(),
            shares: ShareLimits::default(),
        }
    }
}

/// Budgets of one GraphQL document, checked before any of it runs (over HTTP and the
/// WebSocket alike); a document over one is refused with `LIMIT_EXCEEDED` naming it.
#[derive(Clone, Debug, Args)]
pub struct GraphqlLimits {
    /// Deepest selection nesting (GraphiQL's introspection query needs ~13).
    #[arg(long, env = "SESSIOND_MAX_QUERY_DEPTH", default_value_t = 24)]
    pub max_query_depth: usize,
    /// Highest cost: each field costs 1, a list page its size times what each item
    /// selects, a statement of its own 100, an aggregate over a list 5 000.
    #[arg(long, env = "SESSIOND_MAX_QUERY_COST", default_value_t = 100_000)]
    pub max_query_cost: usize,
    /// Most fields a document selects once every fragment spread is written out.
    #[arg(long, env = "SESSIOND_MAX_QUERY_FIELDS", default_value_t = 10_000)]
    pub max_query_fields: usize,
    /// Most fields at the root of one operation (aliases included).
    #[arg(long, env = "SESSIOND_MAX_ROOT_FIELDS", default_value_t = 32)]
    pub max_root_fields: usize,
    /// Most aliased fields in a document, fragments written out.
    #[arg(long, env = "SESSIOND_MAX_ALIASES", default_value_t = 200)]
    pub max_aliases: usize,
    /// Most aggregates (counts, panels) one request runs; they run one after the other,
    /// and one more is refused (`LIMIT_EXCEEDED`).
    #[arg(long, env = "SESSIOND_MAX_AGGREGATES", default_value_t = 8)]
    pub max_aggregates: usize,
    /// Most rows the aggregates of one request may scan together; once they have, the next
    /// aggregate is refused (`LIMIT_EXCEEDED`).
    #[arg(long, env = "SESSIOND_MAX_AGGREGATE_ROWS", default_value_t = 1_000_000)]
    pub max_aggregate_rows: u64,
}

impl Default for GraphqlLimits {
    fn default() -> Self {
        Self {
            max_query_depth: 24,
            max_query_cost: 100_000,
            max_query_fields: 10_000,
            max_root_fields: 32,
            max_aliases: 200,
            max_aggregates: 8,
            max_aggregate_rows: 1_000_000,
        }
    }
}

/// What one user (all of their tokens together) may hold at once of what every user
/// shares: WebSocket connections, subscriptions, terminals, replays of missed events. One
/// more is refused with `LIMIT_EXCEEDED` (a WebSocket: closed with 1013); what the others
/// hold is not touched.
#[derive(Clone, Debug, Args)]
pub struct ShareLimits {
    /// Open WebSocket connections (`/graphql/ws` and terminals) per user.
    #[arg(long, env = "SESSIOND_MAX_WS_CONNECTIONS_PER_USER", default_value_t = 32)]
    pub max_ws_connections_per_user: usize,
    /// Running subscriptions per user, over all their connections.
    #[arg(long, env = "SESSIOND_MAX_SUBSCRIPTIONS_PER_USER", default_value_t = 200)]
    pub max_subscriptions_per_user: usize,
    /// Open terminals per user.
    #[arg(long, env = "SESSIOND_MAX_TERMINALS_PER_USER", default_value_t = 8)]
    pub max_terminals_per_user: usize,
    /// Subscriptions per user replaying missed events (`after:`) at once.
    #[arg(long, env = "SESSIOND_MAX_REPLAYS_PER_USER", default_value_t = 4)]
    pub max_replays_per_user: usize,
    /// Connections to sessions' apps per user being answered at once (a download, an
    /// upload, a WebSocket); one more is answered 429.
    #[arg(long, env = "SESSIOND_MAX_APP_CONNECTIONS_PER_USER", default_value_t = 64)]
    pub max_app_connections_per_user: usize,
    /// Operations a user starts per second over WebSockets (subscriptions, queries,
    /// mutations; opening a terminal counts 10), twice as many at once; past it an
    /// operation is refused (`LIMIT_EXCEEDED`).
    #[arg(long, env = "SESSIOND_OPERATIONS_PER_SECOND_PER_USER", default_value_t = 20)]
    pub operations_per_second_per_user: u32,
    /// WebSocket connections not yet authenticated, over all clients; one more is closed
    /// at once (1013). Each has `--ws-init-timeout-ms` to authenticate.
    #[arg(long, env = "SESSIOND_MAX_WS_UNAUTHENTICATED", default_value_t = 256)]
    pub max_ws_unauthenticated: usize,
    /// Database connections replays read on: a pool of their own, never the requests'.
    #[arg(long, env = "SESSIOND_REPLAY_CONNECTIONS", default_value_t = 2)]
    pub replay_connections: u32,
    /// Rows replays may look through per second, over all of them (each statement is
    /// charged the events it examined, whether or not they were the replay's): a replay from
    /// an old cursor is paced, never a flood.
    #[arg(long, env = "SESSIOND_REPLAY_ROWS_PER_SECOND", default_value_t = 20_000)]
    pub replay_rows_per_second: u32,
}

impl Default for ShareLimits {
    fn default() -> Self {
        Self {
            max_ws_connections_per_user: 32,
            max_subscriptions_per_user: 200,
            max_terminals_per_user: 8,
            max_replays_per_user: 4,
            max_app_connections_per_user: 64,
            operations_per_second_per_user: 20,
            max_ws_unauthenticated: 256,
            replay_connections: 2,
            replay_rows_per_second: 20_000,
        }
    }
}

/// Limits and timings of the GraphQL WebSocket (`/graphql/ws`).
#[derive(Clone, Debug, Args)]
pub struct WsLimits {
    /// A connection that sends no `connection_init` within this time is closed (4408).
    #[arg(long, env = "SESSIOND_WS_INIT_TIMEOUT_MS", default_value_t = 3_000)]
    pub ws_init_timeout_ms: u64,
    /// The server pings every connection this often.
    #[arg(long, env = "SESSIOND_WS_KEEPALIVE_MS", default_value_t = 15_000)]
    pub ws_keepalive_ms: u64,
    /// A connection from which nothing (not even a pong) arrives for this long is closed;
    /// so is one that cannot take a message for this long.
    #[arg(long, env = "SESSIOND_WS_KEEPALIVE_TIMEOUT_MS", default_value_t = 45_000)]
    pub ws_keepalive_timeout_ms: u64,
    /// Open WebSocket connections at most; one more is closed at once (1013).
    #[arg(long, env = "SESSIOND_MAX_WS_CONNECTIONS", default_value_t = 4_096)]
    pub max_ws_connections: usize,
    /// Operations running at once on one connection; one more is refused (LIMIT_EXCEEDED).
    #[arg(long, env = "SESSIOND_MAX_SUBSCRIPTIONS_PER_CONNECTION", default_value_t = 100)]
    pub max_subscriptions_per_connection: usize,
    /// Events a subscription may fall behind before it is ended with `LAGGED` (the client
    /// resumes from the cursor that error carries).
    #[arg(long, env = "SESSIOND_SUBSCRIPTION_BUFFER", default_value_t = crate::domain::live::events::DEFAULT_CAPACITY)]
    pub subscription_buffer: usize,
    /// Largest accepted WebSocket message, in bytes.
    #[arg(long, env = "SESSIOND_WS_MAX_MESSAGE_BYTES", default_value_t = 64 << 10)]
    pub ws_max_message_bytes: usize,
}

impl Default for WsLimits {
    fn default() -> Self {
        Self {
            ws_init_timeout_ms: 3_000,
            ws_keepalive_ms: 15_000,
            ws_keepalive_timeout_ms: 45_000,
            max_ws_connections: 4_096,
            max_subscriptions_per_connection: 100,
            subscription_buffer: crate::domain::live::events::DEFAULT_CAPACITY,
            ws_max_message_bytes: 64 << 10,
        }
    }
}
