//! A session's applications, as its image declares them: a name, the port the app listens
//! on inside the session (on the session's own loopback), the command that starts it with
//! the session (unless the image's own command does), and whether it needs the path it is
//! served under (`{base}` in its command, as jupyter-server-proxy declares it). A name
//! alone is what it always was (`terminal`, or a name without an address); the common ones
//! (`jupyter`, `tensorboard`) get their defaults.

pub mod grants;

use serde::{Deserialize, Serialize};

/// The app every interactive session of a local or Slurm engine has: a shell, not a port.
pub const TERMINAL: &str = "terminal";

/// What `{base}` in an app's command becomes: the path it is served under, ending in `/`.
pub const BASE: &str = "{base}";

/// An app as an image declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub name: String,
    /// Where it listens inside the session; none: an app without an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// What starts it with the session (a shell command); none: the image's own command
    /// starts it, or nothing does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// It is served under its base path, which its command is given as `{base}`; otherwise
    /// the proxy takes the base path off its requests.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub base_path: bool,
}

impl AppSpec {
    /// An app of that name alone: the common ones' defaults, or a name without an address.
    pub fn named(name: &str) -> Self {
        let (port, command, base_path) = match name {
            "jupyter" => (
                Some(8888),
                Some(
                    "jupyter lab --no-browser --ip 127.0.0.1 --port 8888 --ServerApp.base_url={base} \
                     --IdentityProvider.token='' --ServerApp.root_dir=$HOME"
                        .to_owned(),
                ),
                true,
            ),
            "tensorboard" => (
                Some(6006),
                Some("tensorboard --logdir $HOME --host 127.0.0.1 --port 6006 --path_prefix {base}".to_owned()),
                true,
            ),
            _ => (None, None, false),
        };
        Self { name: name.to_owned(), port, command, base_path }
    }

    /// Its command for the session, `{base}` made the path it is served under.
    pub fn command_for(&self, base: &str) -> Option<String> {
        self.command.as_ref().map(|c| c.replace(BASE, base))
    }

    /// The words a listing shows of it: its name, and its port when it has one.
    pub fn shown(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.name),
            None => self.name.clone(),
        }
    }
}

/// The path session `session`'s app `app` is served under, on the apps' origin.
pub fn base(session: uuid::Uuid, app: &str) -> String {
    format!("/s/{session}/{app}/")
}

/// How long after its session starts an app whose port does not answer yet is starting,
/// not failed.
pub const STARTUP_GRACE: chrono::TimeDelta = chrono::TimeDelta::seconds(120);

/// Where a web app of a running session is: its port answers, or not yet, or not at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Starting,
    Ready,
    /// Why it is taken to have failed.
    Failed(String),
}

/// Whether app `app` (with a port) of running session `s` answers now: a connection to its
/// port on the session's own loopback ([`crate::domain::runtime::apps::connect`]).
pub async fn readiness(
    local: Option<&crate::domain::runtime::local::terminal::LocalAccess>,
    s: &entity::session::Model,
    app: &AppSpec,
    now: chrono::DateTime<chrono::Utc>,
) -> Readiness {
    let Some(port) = app.port else { return Readiness::Failed("it has no port".to_owned()) };
    match crate::domain::runtime::apps::connect(local, s, port).await {
        Ok(_) => Readiness::Ready,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            if s.started_at.is_none_or(|t| now - t < STARTUP_GRACE) {
                Readiness::Starting
            } else {
                Readiness::Failed(format!("nothing listens on its port {port}"))
            }
        }
        Err(e) => Readiness::Failed(format!("it cannot be reached: {e}")),
    }
}

/// Whether `name` may name an app: lower-case letters, digits and `-`, 1 to 32 of them,
/// starting with a letter (it is a part of the app's address).
pub fn valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An image's apps as stored (`images.apps`): each a name alone or a declaration.
pub fn of_image(image: &entity::image::Model) -> Vec<AppSpec> {
    image
        .apps
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| match a {
            serde_json::Value::String(name) => Some(AppSpec::named(name)),
            declared => serde_json::from_value(declared.clone()).ok(),
        })
        .collect()
}

/// How `apps` are stored: a name alone stays a string, a declaration is an object.
pub fn stored(apps: &[Declared]) -> serde_json::Value {
    serde_json::Value::Array(
        apps.iter()
            .map(|a| match a {
                Declared::Name(name) => serde_json::Value::String(name.clone()),
                Declared::Spec(spec) => serde_json::to_value(spec).unwrap_or(serde_json::Value::Null),
            })
            .collect(),
    )
}

/// An app as a declaration gives it: a name alone, or a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Declared {
    Name(String),
    Spec(AppSpec),
}

impl Declared {
    pub fn spec(&self) -> AppSpec {
        match self {
            Declared::Name(name) => AppSpec::named(name),
            Declared::Spec(spec) => spec.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_alone_stays_a_name_and_common_ones_get_defaults() {
        let image = entity::image::Model {
            name: "x".into(),
            supported_types: serde_json::json!([]),
            minimum_slots: serde_json::json!({}),
            apps: stored(&[
                Declared::Name("terminal".into()),
                Declared::Name("jupyter".into()),
                Declared::Spec(AppSpec { name: "web".into(), port: Some(8000), command: None, base_path: false }),
            ]),
            local_environment: None,
            created_at: chrono::Utc::now(),
        };
        let apps = of_image(&image);
        assert_eq!(apps.iter().map(AppSpec::shown).collect::<Vec<_>>(), ["terminal", "jupyter:8888", "web:8000"]);
        assert_eq!(image.apps[0], "terminal");
        let jupyter = apps[1].command_for("/s/1/jupyter/").expect("a command");
        assert!(jupyter.contains("--ServerApp.base_url=/s/1/jupyter/"), "{jupyter}");
    }

    #[test]
    fn names_are_parts_of_an_address() {
        assert!(valid_name("jupyter") && valid_name("web-2"));
        assert!(!valid_name("") && !valid_name("Web") && !valid_name("2web") && !valid_name("a/b"));
        assert!(!valid_name(&"a".repeat(33)));
    }
}
