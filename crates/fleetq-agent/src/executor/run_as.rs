//! Who a process workload runs as. A workload is a tenant's code: it must
//! not get the agent's identity (root in the examples), its environment
//! (tokens, secrets) or its files (the TLS key, with which it could pose as
//! the agent and receive other tenants' workloads).
//!
//! - An agent running as root drops each workload to `run_as_user` (and
//!   `run_as_group`, default the user's primary group), with no
//!   supplementary groups, through `setpriv` in the wrapper that records
//!   the exit code (which stays root, so the records stay in the agent's
//!   own directory). Without `run_as_user` it refuses to start workloads
//!   unless `allow_root_workloads` says otherwise.
//! - An agent that is not root runs workloads as itself (it cannot do
//!   otherwise); its state directory and keys should then belong to
//!   another user.
//! - Every workload starts from an empty environment: what its spec sets,
//!   `CUDA_VISIBLE_DEVICES`, `FLEETQ_WORKLOAD`, `FLEETQ_EPOCH`, and
//!   `PATH`, `HOME`, `USER` for the user it runs as. That environment is
//!   given by `env -i` after the drop; the root wrapper itself runs with a
//!   fixed PATH and calls `setpriv` and `env` by absolute path, so nothing
//!   a tenant sets (PATH, LD_PRELOAD) reaches a root process.

use std::ffi::{CStr, CString};

/// `setpriv` by absolute path: the root shell that drops to the
/// workload's user looks nothing up in a PATH.
pub const SETPRIV: &str = "/usr/bin/setpriv";
/// `env`, which gives the workload its environment after the drop.
pub const ENV: &str = "/usr/bin/env";

/// The `PATH` a workload gets.
pub const WORKLOAD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunAs {
    /// Drop to this user and group (the agent is root).
    User {
        name: String,
        uid: u32,
        gid: u32,
        home: String,
    },
    /// Run as the agent's own user (not root, or root allowed).
    Agent { name: String, home: String },
    /// Refuse to start workloads, saying why.
    Refuse(String),
}

struct Account {
    name: String,
    uid: u32,
    gid: u32,
    home: String,
}

fn account_by_name(name: &str) -> Option<Account> {
    let c = CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; we
    // copy what we need before any other call could overwrite it. The
    // agent resolves accounts once, at start, on one thread.
    unsafe {
        let pw = libc::getpwnam(c.as_ptr());
        account_of(pw)
    }
}

fn account_by_uid(uid: u32) -> Option<Account> {
    // SAFETY: as above.
    unsafe {
        let pw = libc::getpwuid(uid);
        account_of(pw)
    }
}

/// # Safety
/// `pw` is null or points at a valid `passwd` from getpwnam/getpwuid.
unsafe fn account_of(pw: *mut libc::passwd) -> Option<Account> {
    if pw.is_null() {
        return None;
    }
    let pw = &*pw;
    Some(Account {
        name: CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        home: CStr::from_ptr(pw.pw_dir).to_string_lossy().into_owned(),
    })
}

fn group_by_name(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: getgrnam returns static storage or null; only the gid is read.
    unsafe {
        let gr = libc::getgrnam(c.as_ptr());
        (!gr.is_null()).then(|| (*gr).gr_gid)
    }
}

impl RunAs {
    /// Resolves the configuration against this machine's accounts.
    pub fn resolve(
        user: Option<&str>,
        group: Option<&str>,
        allow_root: bool,
    ) -> Result<RunAs, String> {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        let me = account_by_uid(euid);
        let (my_name, my_home) = me
            .map(|a| (a.name, a.home))
            .unwrap_or_else(|| (euid.to_string(), "/".into()));
        let Some(user) = user else {
            if euid == 0 && !allow_root {
                return Ok(RunAs::Refuse(
                    "this agent runs as root and would run workloads as root: set run_as_user (e.g. \"nobody\" or a dedicated account), or allow_root_workloads = true to accept the risk".into(),
                ));
            }
            return Ok(RunAs::Agent {
                name: my_name,
                home: my_home,
            });
        };
        let account = match user.parse::<u32>() {
            Ok(uid) => account_by_uid(uid).unwrap_or(Account {
                name: uid.to_string(),
                uid,
                gid: uid,
                home: "/".into(),
            }),
            Err(_) => account_by_name(user)
                .ok_or_else(|| format!("run_as_user: no user {user:?} on this machine"))?,
        };
        let gid = match group {
            None => account.gid,
            Some(g) => match g.parse::<u32>() {
                Ok(gid) => gid,
                Err(_) => group_by_name(g)
                    .ok_or_else(|| format!("run_as_group: no group {g:?} on this machine"))?,
            },
        };
        if euid != 0 {
            if account.uid == euid {
                return Ok(RunAs::Agent {
                    name: my_name,
                    home: my_home,
                });
            }
            return Err(format!(
                "run_as_user: {user:?} needs the agent to run as root (it runs as uid {euid})"
            ));
        }
        if account.uid == 0 && !allow_root {
            return Err(
                "run_as_user: root; set allow_root_workloads = true to run workloads as root"
                    .into(),
            );
        }
        if !std::path::Path::new(SETPRIV).is_file() {
            return Err(format!(
                "run_as_user: dropping to {user:?} needs {SETPRIV} (util-linux), which this machine lacks"
            ));
        }
        Ok(RunAs::User {
            name: account.name,
            uid: account.uid,
            gid,
            home: account.home,
        })
    }

    /// `USER` and `HOME` for the workload.
    pub fn user_and_home(&self) -> (&str, &str) {
        match self {
            RunAs::User { name, home, .. } | RunAs::Agent { name, home } => (name, home),
            RunAs::Refuse(_) => ("nobody", "/"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_must_name_a_user_or_allow_itself() {
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let default = RunAs::resolve(None, None, false).expect("resolves");
        if root {
            assert!(
                matches!(default, RunAs::Refuse(ref why) if why.contains("run_as_user")),
                "{default:?}"
            );
            let nobody = RunAs::resolve(Some("nobody"), None, false).expect("nobody exists");
            assert!(
                matches!(nobody, RunAs::User { uid, .. } if uid != 0),
                "{nobody:?}"
            );
            assert!(RunAs::resolve(Some("root"), None, false).is_err());
            assert!(matches!(
                RunAs::resolve(None, None, true),
                Ok(RunAs::Agent { .. })
            ));
        } else {
            assert!(matches!(default, RunAs::Agent { .. }));
        }
        let e = RunAs::resolve(Some("no-such-user-here"), None, false).unwrap_err();
        assert!(e.contains("no user"), "{e}");
    }
}
