//! `sessiond serve`: open and migrate the database, seed the demo when asked, serve HTTP
//! until SIGTERM or Ctrl-C.

use tokio::net::TcpListener;

use sea_orm::DatabaseConnection;

use std::time::Duration;

use crate::config::{DbArgs, RuntimeArgs, RuntimeChoice, ServeArgs, Timings};
use crate::db;
use crate::domain::directory::seed;
use crate::domain::launch::LaunchLimits;
use crate::domain::live::events::EventBus;
use crate::domain::live::{Live, LiveConnections};
use crate::domain::runtime::environments::Images;
use crate::domain::runtime::local::{LocalConfig, LocalRuntime};
use crate::domain::runtime::{self, RuntimeInfo, SimulatedRuntime};
use crate::domain::scheduling;
use crate::http::metrics::Metrics;
use crate::http::serve::{self, ConnectionLimits};
use crate::http::{AppState, app};

/// Connects, migrates and, with `demo`, seeds an empty database: everything `serve` does
/// before it listens. Returns the connection and whether demo data was seeded now.
pub async fn open_database(
    args: &DbArgs,
    demo: bool,
) -> Result<(DatabaseConnection, bool), Box<dyn std::error::Error>> {
    let conn = db::connect(args).await?;
    db::migrate(&conn).await?;
    crate::domain::sessions::export::signing_key(&conn)
        .await
        .map_err(|e| format!("reading the signing key failed: {e:?}"))?;
    let seeded = demo && seed::seed_demo(&conn).await.map_err(|e| format!("seeding the demo data failed: {e:?}"))?;
    Ok((conn, seeded))
}

pub async fn serve(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let (conn, seeded) = open_database(&args.db, args.demo).await?;
    if args.demo {
        if seeded {
            tracing::info!("demo data seeded");
        } else {
            tracing::info!("database not empty: demo data not seeded again");
        }
        let tokens: Vec<String> = seed::DEMO_USERS.iter().map(|u| format!("{} ({})", u.token, u.email)).collect();
        tracing::warn!("demo tokens, for trying sessiond out only (anyone can use them): {}", tokens.join(", "));
    }
    let listener = TcpListener::bind(args.bind).await?;
    let addr = listener.local_addr()?;
    tracing::info!("sessiond listening on http://{addr}; GraphiQL at http://{addr}/graphiql");
    let apps_bind = args.apps_bind.unwrap_or_else(|| std::net::SocketAddr::new(args.bind.ip(), 0));
    let apps_listener =
        TcpListener::bind(apps_bind).await.map_err(|e| format!("the apps' listener on {apps_bind}: {e}"))?;
    let apps_addr = apps_listener.local_addr()?;
    let apps_url = args.apps_url.clone().unwrap_or_else(|| format!("http://{apps_addr}"));
    tracing::info!("sessions' apps served on http://{apps_addr} (public address {apps_url})");
    let (local, mut runtime_info) = choose_runtime(&args.runtime, &conn, std::env::current_exe()?).await?;
    runtime_info.apps_url = Some(apps_url);
    match &runtime_info.agent {
        Some(agent) => tracing::info!(
            "runtime: local, agent {agent} in resource group {} ({}); limits: {}",
            args.runtime.local_resource_group,
            runtime_info.reason,
            runtime_info.enforced.join("; ")
        ),
        None => tracing::info!("runtime: this machine runs no session ({})", runtime_info.reason),
    }
    log_engines(&conn).await?;
    // Each of the server's own readers and writers on a connection of its own, none on the
    // requests' pool: the workers (scheduler, runtimes, event feed), the live readers (the
    // log feed, the credentials' poll), the replays, and log retention.
    let background = db::connect_workers(&args.db, &conn).await?;
    let readers = db::connect_workers(&args.db, &conn).await?;
    let replays = db::connect_replays(&args.db, args.http.shares.replay_connections, &conn).await?;
    let retention = db::connect_workers(&args.db, &conn).await?;
    let connections =
        LiveConnections { events: background.clone(), readers: readers.clone(), replays: replays.clone() };
    let live = Live::start(connections, args.http.live_options())
        .await
        .map_err(|e| format!("starting the event feed failed: {e:?}"))?;
    let metrics = Metrics::default();
    let mut workers = spawn_workers(&background, &live.bus, &args.timings, &metrics, local);
    workers.push(tokio::spawn(crate::domain::runtime::declared::run_declared(
        background.clone(),
        live.bus.clone(),
        Duration::from_millis(args.runtime.terminate_grace_ms),
    )));
    workers.push(tokio::spawn(crate::domain::live::logs::retire_forever(
        retention.clone(),
        args.retention.retention(),
        Duration::from_secs(3600),
    )));
    workers.push(tokio::spawn(crate::domain::sessions::tally::fold_forever(background.clone())));
    let connections = ConnectionLimits::of(&args.http);
    let delivery = args.callbacks.delivery();
    if !delivery.allow.is_empty() {
        tracing::info!("completion callbacks may call {}", delivery.allow);
    }
    let launch = LaunchLimits {
        max_count: args.max_launch_count,
        callbacks: delivery.allow.clone(),
        max_mounts: args.max_mounts,
    };
    workers.push(tokio::spawn(crate::domain::lifecycle::callbacks::deliver::run(
        background.clone(),
        live.bus.clone(),
        delivery,
    )));
    let state = AppState::with_metrics(conn.clone(), live, args.http, launch, metrics.clone(), runtime_info);
    let stop = futures_util::FutureExt::shared(shutdown_signal());
    let apps = crate::http::apps::router(state.clone());
    tokio::join!(
        serve::serve(listener, app(state), connections.clone(), metrics.connections(), stop.clone()),
        serve::serve(apps_listener, apps, connections, metrics.connections(), stop),
    );
    for w in workers {
        w.abort();
    }
    if !db::in_memory(&args.db.database_url) {
        for pool in [background, readers, replays, retention] {
            pool.close().await.ok();
        }
    }
    db::close(conn, Duration::from_secs(5)).await;
    tracing::info!("sessiond stopped");
    Ok(())
}

/// Says at start which engine runs which resource group, and which groups none runs.
async fn log_engines(db: &DatabaseConnection) -> Result<(), Box<dyn std::error::Error>> {
    use crate::domain::runtime::declared;
    use crate::domain::runtime::engines::{self, EngineKind};
    let stored = engines::stored(db).await.map_err(|e| format!("reading the engines failed: {e:?}"))?;
    for e in declared::reports(stored) {
        let groups = if e.groups.is_empty() { "no resource group".to_owned() } else { e.groups.join(", ") };
        match e.kind {
            EngineKind::Simulated => tracing::warn!(
                "engine {} (simulated) runs {groups}: nothing really runs there (for the demo and tests only)",
                e.name
            ),
            kind => tracing::info!("engine {} ({}) runs {groups}", e.name, kind.as_str()),
        }
    }
    let idle = declared::groups_without_engine(db).await.map_err(|e| format!("reading the groups failed: {e:?}"))?;
    for g in idle {
        tracing::warn!("resource group {g} names no engine: nothing runs its sessions (declare `engine = \"NAME\"`)");
    }
    Ok(())
}

/// The runtime of this machine, as `args` choose: the local one when asked for (an error
/// when it cannot run here) or, with `auto`, when a sandbox starts here; else none (the
/// simulated runtime drives every agent). `executable` is the `sessiond` binary that runs
/// the supervisors. The local runtime's agent is registered.
pub async fn choose_runtime(
    args: &RuntimeArgs,
    db: &DatabaseConnection,
    executable: std::path::PathBuf,
) -> Result<(Option<LocalRuntime>, RuntimeInfo), Box<dyn std::error::Error>> {
    if args.choice == RuntimeChoice::Simulated {
        return Ok((None, RuntimeInfo::simulated("chosen with --runtime simulated")));
    }
    let images = match &args.images_file {
        Some(path) => crate::domain::directory::apply::images_file(path)?,
        None => Images::default(),
    };
    use crate::domain::runtime::local::machine::{DEFAULT_RUNTIME_DIR, reachable_runtime_dir};
    let explicit = args.runtime_dir != std::path::Path::new(DEFAULT_RUNTIME_DIR);
    let dir = match reachable_runtime_dir(&std::path::absolute(&args.runtime_dir)?, explicit) {
        Ok((dir, note)) => {
            if let Some(note) = note {
                tracing::info!("{note}");
            }
            dir
        }
        Err(why) if args.choice == RuntimeChoice::Local => return Err(format!("--runtime local: {why}").into()),
        Err(why) => return Ok((None, RuntimeInfo::simulated(format!("the local runtime cannot run here: {why}")))),
    };
    let config = LocalConfig {
        dir,
        agent: args.local_agent.clone(),
        resource_group: args.local_resource_group.clone(),
        images,
        grace: Duration::from_millis(args.terminate_grace_ms),
        executable,
        tick: Duration::from_millis(500),
        work_dir_limit: args.work_dir_limit,
        image_cache_limit: args.image_cache_limit,
    };
    match LocalRuntime::probe(config) {
        Ok((local, info)) => {
            local.register(db).await.map_err(|e| format!("registering this machine as an agent failed: {e:?}"))?;
            Ok((Some(local), info))
        }
        Err(why) if args.choice == RuntimeChoice::Local => Err(format!("--runtime local: {why}").into()),
        Err(why) => Ok((None, RuntimeInfo::simulated(format!("the local runtime cannot run here: {why}")))),
    }
}

/// Starts the scheduler, the simulated runtime and the local one when there is one. They
/// resume whatever the database holds: after a restart every non-terminal session continues
/// from its stored status (the local runtime: from what its supervisor reports).
pub fn spawn_workers(
    db: &DatabaseConnection,
    bus: &EventBus,
    timings: &Timings,
    metrics: &Metrics,
    local: Option<LocalRuntime>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let runtime = SimulatedRuntime {
        step: Duration::from_millis(timings.sim_step_ms),
        batch_run: Duration::from_millis(timings.sim_batch_ms),
        except_agent: local.as_ref().map(|l| l.agent().to_owned()),
    };
    let metrics = metrics.clone();
    let mut workers = vec![
        tokio::spawn(scheduling::run(
            db.clone(),
            bus.clone(),
            Duration::from_millis(timings.scheduler_interval_ms),
            move |took| metrics.scheduler_pass(took),
        )),
        tokio::spawn(runtime::run(runtime, db.clone(), bus.clone())),
        tokio::spawn(crate::domain::reclaim::expiry::run(
            db.clone(),
            bus.clone(),
            Duration::from_millis(timings.expiry_warning_ms),
            Duration::from_millis(timings.scheduler_interval_ms.min(1000)),
        )),
    ];
    if let Some(local) = local {
        workers.push(tokio::spawn(runtime::run(local, db.clone(), bus.clone())));
    }
    workers
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
