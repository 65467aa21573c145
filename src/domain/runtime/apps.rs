//! A session's web apps, whichever engine runs it: reached on the session's own loopback
//! by the local runtime's dialer ([`super::local::dial`]) on this machine, or through the relay
//! of its Slurm job's supervisor ([`slurm::relay`]) on a node. Either way the sandbox keeps
//! no network.

use entity::session;

use super::local::terminal::LocalAccess;
use super::slurm;
use crate::domain::model::SessionType;
use crate::domain::model::status::SessionStatus;

/// Where this server reaches the apps of a session.
#[derive(Clone, Debug)]
pub enum Reach {
    /// This machine's sessions, through their dialers.
    Here(std::sync::Arc<super::local::dial::Dialers>),
    /// A Slurm engine's shared directory, where its sessions' relays say where they listen.
    Relayed(String),
}

impl Reach {
    /// Where the apps of session `s` are reached from here now, if they are: an
    /// interactive session, running on this machine or as a job of a Slurm engine that
    /// runs sessiond's sandbox.
    pub fn of(local: Option<&LocalAccess>, s: &session::Model) -> Option<Reach> {
        if s.session_type != SessionType::Interactive.as_str() || s.status != SessionStatus::Running.as_str() {
            return None;
        }
        match local {
            Some(l) if s.agent_id.as_deref() == Some(l.agent.as_str()) => Some(Reach::Here(l.dialers.clone())),
            _ => slurm::relays_of(&s.resource_group).map(Reach::Relayed),
        }
    }

    /// A connection to `port` on the own loopback of session `id`. `ConnectionRefused` when
    /// nothing listens there (yet).
    pub async fn connect(&self, id: uuid::Uuid, port: u16) -> std::io::Result<tokio::net::TcpStream> {
        match self {
            Reach::Here(dialers) => dialers.connect(id, port).await,
            Reach::Relayed(dir) => slurm::relay::connect(dir, id, port).await,
        }
    }
}

/// Whether this server reaches the apps of session `s` now ([`Reach::of`]).
pub fn reachable(local: Option<&LocalAccess>, s: &session::Model) -> bool {
    Reach::of(local, s).is_some()
}

/// A connection to `port` on the own loopback of session `s`. `ConnectionRefused` when
/// nothing listens there (yet); `NotFound` when this server does not reach its apps.
pub async fn connect(
    local: Option<&LocalAccess>,
    s: &session::Model,
    port: u16,
) -> std::io::Result<tokio::net::TcpStream> {
    match Reach::of(local, s) {
        Some(reach) => reach.connect(s.id, port).await,
        None => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "its apps are not reached from here")),
    }
}
