//! The `sessiond` command line: serve | migrate | schema | generate | apply | token | supervise.

use std::process::ExitCode;

/// mimalloc: the server makes many small, short-lived allocations on many threads (a
/// response per event per subscriber); it returns freed pages to the system, where glibc's
/// allocator keeps the high-water mark. Built with `no_thp`: on machines whose transparent
/// huge pages are `always`, each 2 MiB region of mimalloc's arena the server touched became
/// resident whole (an idle server held 22 MiB of heap instead of 4).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use sessiond::config::{Cli, Command, LogFormat, TokenCommand};
use sessiond::{db, domain, graphql, server};

/// Log lines on stderr, filtered by `SESSIOND_LOG` (default `info`): plain text, coloured
/// only when stderr is a terminal, or one JSON object per line.
fn logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SESSIOND_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Serve(_)) {
        // Before anything is opened: what the server inherited beyond its standard
        // descriptors (a file its parent left open) must reach no session and no terminal.
        domain::runtime::local::supervisor::close_inherited_descriptors();
    }
    logging(cli.log_format);
    // A supervisor is a small synchronous process, one per running session: no runtime.
    let result = if let Command::Supervise { dir } = &cli.command {
        domain::runtime::local::supervisor::supervise(dir).map_err(Into::into)
    } else if let Command::Enter { pid, started, join, max_file, watchdog_cores, command } = &cli.command {
        // Single-threaded, as entering a user namespace requires: no runtime.
        let entry = domain::runtime::local::enter::Entry {
            pid: *pid,
            started: *started,
            join,
            max_file: *max_file,
            watchdog_cores: *watchdog_cores,
            command,
        };
        return match domain::runtime::local::enter::enter(&entry) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(why) => {
                eprintln!("sessiond enter: {why}");
                ExitCode::from(125)
            }
        };
    } else if let Command::Dial { pid, started } = &cli.command {
        // Single-threaded, as entering a user namespace requires: no runtime.
        return match domain::runtime::local::dial::serve(*pid, *started) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("sessiond dial: {why}");
                ExitCode::from(125)
            }
        };
    } else if let Command::Userns { command } = &cli.command {
        // Single-threaded, as making a user namespace requires: no runtime.
        let why = domain::runtime::local::enter::exec_in_own_user_namespace(command);
        eprintln!("sessiond userns: {why}");
        return ExitCode::from(125);
    } else if let Command::Images { command } = cli.command {
        // The machine's store, without a server: a pull runs its own small runtime.
        images(command)
    } else {
        match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => rt.block_on(run(cli)),
            Err(e) => Err(e.into()),
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sessiond: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `sessiond apply`: the plan on stdout, one change per line, then what was done.
async fn apply(
    conn: &sea_orm::DatabaseConnection,
    file: &std::path::Path,
    options: domain::directory::apply::Options,
) -> Result<(), Box<dyn std::error::Error>> {
    use domain::directory::apply::{ApplyError, ApplyInputError};
    let declared = match domain::directory::apply::read(conn, file).await {
        Ok(d) => d,
        Err(ApplyInputError::Failed(err)) => return Err(format!("{err}: {err:?}").into()),
        Err(err) => return Err(format!("nothing applied: {err}").into()),
    };
    let dry_run = options.dry_run;
    let plan = match domain::directory::apply::apply(conn, &declared, options).await {
        Ok(plan) => plan,
        Err(err @ ApplyError::Refused(_)) => return Err(format!("nothing applied: {err}").into()),
        Err(ApplyError::Failed(err)) => return Err(format!("nothing applied: {err}: {err:?}").into()),
    };
    for change in &plan.changes {
        println!("{change}");
    }
    if !plan.undeclared.is_empty() {
        eprintln!("sessiond: kept, not declared (--prune deletes them): {}", plan.undeclared.join(", "));
    }
    let n = plan.changes.len();
    match (n, dry_run) {
        (0, _) => eprintln!("sessiond: no changes; the database already holds what {} declares", file.display()),
        (_, true) => eprintln!("sessiond: {n} change(s) planned; nothing written (--dry-run)"),
        (_, false) => eprintln!("sessiond: {n} change(s) applied"),
    }
    Ok(())
}

/// `sessiond images`: the machine's image store, listed, pulled into or pruned.
fn images(command: sessiond::config::ImagesCommand) -> Result<(), Box<dyn std::error::Error>> {
    use domain::runtime::image::store::Store;
    let dir = match &command {
        sessiond::config::ImagesCommand::Ls { runtime_dir }
        | sessiond::config::ImagesCommand::Prune { runtime_dir } => runtime_dir,
        sessiond::config::ImagesCommand::Pull { .. } => return pull_image(command),
        sessiond::config::ImagesCommand::Import { .. } => return import_images(command),
    };
    if !dir.join("oci").is_dir() {
        eprintln!("sessiond: no image store in {} (nothing pulled there yet)", dir.display());
        return Ok(());
    }
    let store = Store::open(dir)?;
    match command {
        sessiond::config::ImagesCommand::Ls { .. } => {
            println!("{:<71}  {:>12}  {:<20}  {:<6}  REFERENCE", "DIGEST", "SIZE", "LAST USED (UTC)", "IN USE");
            for image in store.list() {
                let used = image.used.map_or_else(
                    || "never".to_owned(),
                    |t| chrono::DateTime::<chrono::Utc>::from(t).format("%Y-%m-%d %H:%M:%S").to_string(),
                );
                let in_use = if store.in_use(&image.record.digest) { "yes" } else { "no" };
                let size = image.record.compressed + image.record.unpacked;
                println!(
                    "{:<71}  {size:>12}  {used:<20}  {in_use:<6}  {}",
                    image.record.digest, image.record.reference
                );
            }
            eprintln!("sessiond: {} bytes in the store", store.size());
        }
        sessiond::config::ImagesCommand::Pull { .. } | sessiond::config::ImagesCommand::Import { .. } => {
            return Err("`images pull` and `images import` are handled apart".into());
        }
        sessiond::config::ImagesCommand::Prune { .. } => {
            let removed = store.evict(0);
            for digest in &removed {
                println!("removed {digest}");
            }
            eprintln!("sessiond: {} image(s) removed; {} bytes left in the store", removed.len(), store.size());
        }
    }
    Ok(())
}

/// `sessiond images pull`: one image into the store, its progress on stderr once a second.
fn pull_image(command: sessiond::config::ImagesCommand) -> Result<(), Box<dyn std::error::Error>> {
    use domain::runtime::image::{Progress, pull, registry, store::Store};
    let sessiond::config::ImagesCommand::Pull {
        reference,
        runtime_dir,
        registry_url,
        insecure,
        username,
        password_file,
        token_file,
        image_cache_limit,
    } = command
    else {
        return Err("not a pull".into());
    };
    let mut registries = std::collections::BTreeMap::new();
    if let Some(url) = registry_url {
        let r = registry::Registry { url, username, password_file, token_file, insecure };
        r.validate()?;
        registries.insert("command-line".to_owned(), r);
    }
    let target = registry::resolve(&reference, &registries)?;
    let store = Store::open(&runtime_dir)?;
    let options = pull::Options { refresh: true, ..pull::Options::on_this_machine(image_cache_limit) };
    let mut last = std::time::Instant::now();
    let mut hear = |p: Progress| {
        if last.elapsed() >= std::time::Duration::from_secs(1) {
            last = std::time::Instant::now();
            eprintln!(
                "sessiond: {} of {} bytes, {} of {} layers",
                p.bytes_done, p.bytes_total, p.layers_done, p.layers_total
            );
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let pulled = runtime.block_on(pull::pull(&store, &target, &options, &mut hear))?;
    let r = &pulled.image.record;
    println!("{} {}", r.digest, r.reference);
    eprintln!(
        "sessiond: {} ({} bytes of blobs, {} bytes unpacked){}",
        r.digest,
        r.compressed,
        r.unpacked,
        if pulled.fetched { "" } else { ", already on this machine" }
    );
    Ok(())
}

/// `sessiond images import`: the images of a file into the store.
fn import_images(command: sessiond::config::ImagesCommand) -> Result<(), Box<dyn std::error::Error>> {
    use domain::runtime::image::{import, store::Store};
    let sessiond::config::ImagesCommand::Import { file, names, runtime_dir, image_cache_limit } = command else {
        return Err("not an import".into());
    };
    let store = Store::open(&runtime_dir)?;
    let options = domain::runtime::image::pull::Options::on_this_machine(image_cache_limit);
    for imported in import::import(&store, &file, &names, &options)? {
        let r = &imported.image.record;
        println!("{} {}", r.digest, imported.references.join(" "));
        eprintln!(
            "sessiond: imported {} ({} bytes of blobs, {} bytes unpacked){}",
            r.digest,
            r.compressed,
            r.unpacked,
            if imported.references.is_empty() { "; the file names it by no reference: give one with --as" } else { "" }
        );
    }
    Ok(())
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Serve(args) => server::serve(*args).await?,
        Command::Migrate(args) => {
            let conn = db::connect(&args).await?;
            db::migrate(&conn).await?;
            eprintln!("sessiond: migrations applied");
        }
        Command::Schema => print!("{}", graphql::sdl()),
        Command::Supervise { .. } | Command::Enter { .. } | Command::Dial { .. } | Command::Userns { .. } => {
            return Err("`supervise`, `enter`, `dial` and `userns` run without the server's runtime".into());
        }
        Command::Generate { db: args, sessions, seed } => {
            let (conn, _) = server::open_database(&args, true).await?;
            let started = std::time::Instant::now();
            let opts =
                domain::directory::generate::GenerateOptions { sessions, seed, now: domain::model::clock::now() };
            let report = domain::directory::generate::generate(&conn, &opts).await.map_err(|e| match e {
                domain::DomainError::BadInput(_) => e.to_string(),
                other => format!("{other}: {other:?}"),
            })?;
            eprintln!(
                "sessiond: added {} sessions ({} live, {} launch groups, {} status transitions) in {:.1}s",
                report.sessions,
                report.live,
                report.launch_groups,
                report.transitions,
                started.elapsed().as_secs_f64()
            );
        }
        Command::Apply { explain: true, .. } => print!("{}", domain::directory::apply::keys::explain()),
        Command::Apply { db: args, file, dry_run, prune, as_user, .. } => {
            let file = file.ok_or("give the declaration with -f FILE")?;
            let conn = db::connect(&args).await?;
            db::migrate(&conn).await?;
            let mut options = domain::directory::apply::Options::new(prune, dry_run);
            if let Some(email) = as_user {
                options.actor = domain::directory::apply::actor_of(&conn, &email).await?;
            }
            apply(&conn, &file, options).await?;
        }
        Command::Images { .. } => return Err("`images` runs without the server's runtime".into()),
        Command::Token { command: TokenCommand::Create { db: args, email, policy } } => {
            let conn = db::connect(&args).await?;
            db::migrate(&conn).await?;
            match domain::directory::auth::create_token(&conn, &email, policy.as_deref()).await {
                Ok((token, access_key)) => {
                    println!("{token}");
                    eprintln!(
                        "sessiond: token created for {email} (access key {access_key}); it is shown only this once"
                    );
                }
                Err(domain::DomainError::NotFound(_)) => return Err(format!("no user with email {email}").into()),
                Err(err @ domain::DomainError::BadInput(_)) => return Err(err.to_string().into()),
                Err(err) => return Err(format!("{err}: {err:?}").into()),
            }
        }
        Command::Token { command: TokenCommand::List { db: args, email } } => {
            let conn = db::connect(&args).await?;
            db::migrate(&conn).await?;
            match domain::directory::auth::list_tokens(&conn, &email).await {
                Ok(tokens) => {
                    println!("ACCESS KEY\tPOLICY\tSTATE\tCREATED");
                    for t in tokens {
                        let state = if t.active { "active" } else { "revoked" };
                        println!("{}\t{}\t{state}\t{}", t.access_key, t.resource_policy, t.created_at.to_rfc3339());
                    }
                }
                Err(domain::DomainError::NotFound(_)) => return Err(format!("no user with email {email}").into()),
                Err(err) => return Err(format!("{err}: {err:?}").into()),
            }
        }
        Command::Token { command: TokenCommand::Revoke { db: args, access_key } } => {
            let conn = db::connect(&args).await?;
            db::migrate(&conn).await?;
            match domain::directory::auth::revoke_token(&conn, &access_key).await {
                Ok(true) => eprintln!("sessiond: token {access_key} revoked"),
                Ok(false) => eprintln!("sessiond: token {access_key} was already revoked"),
                Err(domain::DomainError::NotFound(_)) => {
                    return Err(format!("no token with access key {access_key}").into());
                }
                Err(err) => return Err(format!("{err}: {err:?}").into()),
            }
        }
    }
    Ok(())
}
