//! `sessiond dial`: how the server reaches a session's apps without giving the sandbox any
//! network. The session has only its own loopback; its apps listen there. A dialer is a
//! small process of the server's that enters the sandbox's user and network namespaces
//! (and nothing else: not its mount or pid namespace), takes the confinement of the
//! session's processes (their uid, no capability, `no_new_privs`), and then does one thing
//! on request: it makes a TCP socket there and hands it to the server (`SCM_RIGHTS` over
//! the socket pair that is its standard input). The server connects the socket to the
//! app's port: a connection made in the session's network namespace, from outside. Nothing
//! of the host becomes reachable from inside, and the dialer is out of the session's sight
//! (another pid namespace). It ends when the server closes its side, or when the sandbox
//! is gone.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::sched::CloneFlags;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags, SocketType, recvmsg, sendmsg, socket,
};

use super::enter::{confine, enter_namespaces, holder_user_namespace, open_in, sandbox_proc};
use super::sandbox::{NOBODY, is_root};

/// How often an idle dialer checks that its sandbox is still there.
const CHECK_MS: u16 = 2000;

/// Serves sockets made in the network namespace of sandbox `pid` (started at `started`)
/// over the server's line (this process's standard input) until the server or the sandbox
/// is gone.
pub fn serve(pid: u32, started: u64) -> Result<(), String> {
    use nix::fcntl::OFlag;
    super::supervisor::close_inherited_descriptors();
    let server = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(UnixStream::from)
        .map_err(|err| format!("no line to the server: {err}"))?;
    let proc = sandbox_proc(pid, started)?;
    let (user, net) = (open_in(&proc, "ns/user", OFlag::O_RDONLY)?, open_in(&proc, "ns/net", OFlag::O_RDONLY)?);
    let holder = holder_user_namespace(&proc);
    let nobody = (nix::unistd::Uid::from_raw(NOBODY), nix::unistd::Gid::from_raw(NOBODY));
    if is_root() {
        nix::unistd::setgroups(&[]).map_err(|err| format!("cannot leave the supplementary groups: {err}"))?;
        nix::unistd::setresgid(nobody.1, nobody.1, nobody.1).map_err(|err| format!("cannot set the gid: {err}"))?;
    }
    // As `enter` does; the network namespace alone besides the user namespace.
    enter_namespaces(&user, holder.as_ref(), &[(&net, CloneFlags::CLONE_NEWNET, "network")])?;
    drop((user, holder, net));
    confine(nobody.0)?;
    let stat = open_in(&proc, "stat", OFlag::O_RDONLY).ok();
    let mut asked = [0_u8; 1];
    loop {
        let mut fds = [nix::poll::PollFd::new(server.as_fd(), nix::poll::PollFlags::POLLIN)];
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(CHECK_MS))
            .map_err(|err| format!("waiting for the server: {err}"))?;
        if ready == 0 {
            // Idle: still there? (A process gone makes its open /proc files unreadable.)
            let alive = stat.as_ref().is_some_and(|f| nix::sys::uio::pread(f, &mut [0_u8; 1], 0).is_ok());
            if !alive {
                return Ok(());
            }
            continue;
        }
        let mut none = RecvAncillaryBuffer::default();
        let read = recvmsg(&server, &mut [IoSliceMut::new(&mut asked)], &mut none, RecvFlags::empty())
            .map_err(|err| format!("reading the server: {err}"))?;
        if read.bytes == 0 {
            return Ok(());
        }
        let made = socket(AddressFamily::INET, SocketType::STREAM, None)
            .map_err(|err| format!("cannot make a socket in the session: {err}"))?;
        send_fd(&server, &made).map_err(|err| format!("handing a socket to the server: {err}"))?;
    }
}

fn send_fd(to: &UnixStream, fd: &OwnedFd) -> rustix::io::Result<usize> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    let fds = [fd.as_fd()];
    ancillary.push(SendAncillaryMessage::ScmRights(&fds));
    sendmsg(to, &[IoSlice::new(&[1])], &mut ancillary, SendFlags::empty())
}

/// Asks the dialer on `to` for a socket, and receives it.
pub fn request(to: &UnixStream) -> std::io::Result<OwnedFd> {
    use std::io::Write;
    (&*to).write_all(&[1])?;
    let mut byte = [0_u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    recvmsg(to, &mut [IoSliceMut::new(&mut byte)], &mut ancillary, RecvFlags::CMSG_CLOEXEC)?;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the dialer has ended"))
}

/// The server's side of one session's dialer: it asks for sockets one at a time. Dropped,
/// the dialer ends (its standard input closes, and it is killed besides).
#[derive(Debug)]
pub struct Dialer {
    line: std::sync::Mutex<UnixStream>,
    _child: tokio::process::Child,
}

impl Dialer {
    /// Starts `executable dial` for sandbox `pid`, started at `started`.
    pub fn start(executable: &std::path::Path, pid: u32, started: u64) -> std::io::Result<Self> {
        let (ours, theirs) = UnixStream::pair()?;
        let child = tokio::process::Command::new(executable)
            .args(["dial", "--pid", &pid.to_string(), "--started", &started.to_string()])
            .stdin(std::process::Stdio::from(OwnedFd::from(theirs)))
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        Ok(Self { line: std::sync::Mutex::new(ours), _child: child })
    }

    /// A connection to `port` on the session's own loopback.
    pub async fn connect(self: &std::sync::Arc<Self>, port: u16) -> std::io::Result<tokio::net::TcpStream> {
        let me = std::sync::Arc::clone(self);
        let fd = tokio::task::spawn_blocking(move || {
            let line = me.line.lock().map_err(|_| std::io::Error::other("the dialer's line is poisoned"))?;
            request(&line)
        })
        .await
        .map_err(std::io::Error::other)??;
        let socket = std::net::TcpStream::from(fd);
        socket.set_nonblocking(true)?;
        let to = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
        tokio::net::TcpSocket::from_std_stream(socket).connect(to).await
    }
}

/// The dialers of this machine's sessions, one per running sandbox, started when an app of
/// it is first reached; those of sandboxes gone are dropped at the next connection.
#[derive(Debug)]
pub struct Dialers {
    executable: std::path::PathBuf,
    dir: std::path::PathBuf,
    running: std::sync::Mutex<std::collections::HashMap<super::files::Process, std::sync::Arc<Dialer>>>,
}

impl Dialers {
    pub fn new(executable: &std::path::Path, dir: &std::path::Path) -> Self {
        Self { executable: executable.to_owned(), dir: dir.to_owned(), running: Default::default() }
    }

    /// A connection to `port` on the own loopback of session `id`, running here now.
    pub async fn connect(&self, id: uuid::Uuid, port: u16) -> std::io::Result<tokio::net::TcpStream> {
        let sandbox = super::files::SessionDir::of(&self.dir, id)
            .running_sandbox()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "the session does not run here"))?;
        let dialer = {
            let mut running = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // The dialers of sandboxes gone go (each has ended, or ends when dropped).
            running.retain(|p, _| p.alive());
            match running.get(&sandbox) {
                Some(d) => std::sync::Arc::clone(d),
                None => {
                    let d = std::sync::Arc::new(Dialer::start(&self.executable, sandbox.pid, sandbox.started)?);
                    running.insert(sandbox, std::sync::Arc::clone(&d));
                    d
                }
            }
        };
        match dialer.connect(port).await {
            // A dialer that has ended (it failed): the next connection starts another.
            Err(e) if e.kind() != std::io::ErrorKind::ConnectionRefused => {
                let mut running = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                running.remove(&sandbox);
                Err(e)
            }
            other => other,
        }
    }
}
