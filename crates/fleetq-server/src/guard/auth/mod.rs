//! Who is calling, and whether they may (docs/security.md).
//!
//! With TLS on, every request has a [`Caller`]: the identity its client
//! certificate names ([`fleetq_proto::tls::Identity`]) or the tenant its
//! bearer token maps to in the [`Policy`]. Then:
//!
//! - the Raft service serves only nodes that are members of the group (or
//!   any node while this one has no membership yet, so a new learner can
//!   be reached);
//! - the Agent service serves only agents, each for its own cluster only;
//! - the client API serves tenants within their namespaces and verbs,
//!   admins for everything ([`Action`]).
//!
//! Every refusal is logged with the caller and counted in
//! `fleetq_requests_refused_total{reason}` (`unauthenticated`,
//! `forbidden`, `foreign_cluster`; failed handshakes `tls_handshake`), and
//! happens before anything is proposed. With `--insecure` there is no TLS,
//! every caller is [`Caller::Insecure`] and everything is allowed.

pub mod gate;
pub mod policy;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use fleetq_model::Workload;
use fleetq_proto::tls::{Identity, IdentityCache};
use tonic::{Request, Status};

use crate::metrics::reason;
use crate::metrics::ServerMetrics;
pub use policy::{token_digest, Policy, Tenant, Verb};

/// Who a request without a tenant is from, for per-client limits: its
/// source IP address (`unknown` where the transport has none). A
/// tenant's requests are keyed by its name instead.
pub fn client_key<T>(request: &Request<T>) -> String {
    request
        .remote_addr()
        .map(|a| a.ip().to_canonical().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    Node(u64),
    Agent(String),
    Tenant(Tenant),
    /// Plaintext (`--insecure`): unauthenticated, allowed everything.
    Insecure,
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Node(id) => write!(f, "node {id}"),
            Caller::Agent(c) => write!(f, "agent of cluster {c}"),
            Caller::Tenant(t) => write!(f, "tenant {}", t.name),
            Caller::Insecure => f.write_str("insecure client"),
        }
    }
}

impl Caller {
    /// What [`fleetq_model::workload::SUBMITTED_BY_LABEL`] says for a
    /// workload this caller submits: a tenant's name, `agent.CLUSTER`;
    /// none for an unauthenticated (`--insecure`) client or a name that
    /// is not a label value.
    pub fn submitter(&self) -> Option<String> {
        let name = match self {
            Caller::Tenant(t) => t.name.clone(),
            Caller::Agent(cluster) => format!("agent.{cluster}"),
            Caller::Node(_) | Caller::Insecure => return None,
        };
        let valid = !name.is_empty()
            && name.len() <= 63
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric());
        valid.then_some(name)
    }
}

/// What a client API request does, for authorization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// The cluster-wide view: ClusterQueues, cohorts, flavors, priority
    /// classes, clusters, Raft status.
    ReadCluster,
    /// Workloads, LocalQueues or pending lists of one namespace.
    Read(&'a str),
    /// Every namespace's workloads or LocalQueues at once.
    ReadAllNamespaces,
    Submit(&'a str),
    Cancel(&'a str),
    /// Apply or delete a LocalQueue.
    ApplyNamespaced(&'a str),
    /// Admin only: cluster-scoped objects, draining, debug.
    Admin(&'a str),
    /// Change the Raft group (add a learner, change voters): admins, and
    /// member nodes relaying an admin's request to the leader (or a
    /// client's request they authorized: `fleetq logs`).
    Membership(&'a str),
    /// Write anything at all: checked before a request's manifests are
    /// parsed, so a caller that may only read costs no parsing.
    WriteAny,
    /// An agent submitting, reading or cancelling a workload its cluster's
    /// front door made (`--watch-queued-jobs`): the workload's
    /// `fleetq.dev/adopt-cluster`, if any.
    FrontDoor(Option<&'a str>),
}

impl<'a> Action<'a> {
    /// What `caller` needs for `action` on `workload`: for an agent, that
    /// the workload is its own cluster's front door's; for anyone else,
    /// `action` itself.
    pub fn on_workload(caller: &Caller, action: Action<'a>, workload: &'a Workload) -> Action<'a> {
        match caller {
            Caller::Agent(_) => Action::FrontDoor(workload.adopting_cluster()),
            _ => action,
        }
    }
}

/// Whether `caller` may do `action`; the error says why not.
pub fn permits(caller: &Caller, action: Action<'_>) -> Result<(), String> {
    let tenant = match caller {
        Caller::Insecure => return Ok(()),
        // A node certificate grants peer rights only: the Raft service,
        // and relaying an admin's membership change to the leader. Admin
        // rights come from the authorization policy alone.
        Caller::Node(_) if matches!(action, Action::Membership(_)) => return Ok(()),
        Caller::Node(id) => {
            return Err(format!(
                "node {id}'s certificate grants peer rights only; use a client certificate or token the authorization policy names"
            ))
        }
        // An agent's front door submits, reads and cancels the workloads
        // of its own cluster's Jobs; nothing else on the client API.
        Caller::Agent(_) if matches!(action, Action::WriteAny) => return Ok(()),
        Caller::Agent(c) if matches!(action, Action::FrontDoor(Some(own)) if own == c) => {
            return Ok(())
        }
        Caller::Agent(c) => {
            return Err(format!(
                "the agent of cluster {c} may use only the Agent service, and on the client API only the workloads of its own cluster's Jobs (fleetq.dev/adopt-cluster: {c})"
            ))
        }
        Caller::Tenant(t) if t.admin => return Ok(()),
        Caller::Tenant(t) => t,
    };
    let (verb, namespace) = match action {
        Action::WriteAny if tenant.has_verb(Verb::Apply) || tenant.has_verb(Verb::Submit) => {
            return Ok(())
        }
        Action::WriteAny => {
            return Err(format!(
                "tenant {} may neither apply nor submit anything",
                tenant.name
            ))
        }
        Action::ReadCluster if tenant.has_verb(Verb::Get) => return Ok(()),
        Action::ReadCluster => (Verb::Get, None),
        Action::ReadAllNamespaces if tenant.may(Verb::Get, "*") => return Ok(()),
        Action::ReadAllNamespaces => {
            return Err(format!(
                "tenant {} may read only namespaces {:?}; name one (--namespace)",
                tenant.name, tenant.namespaces
            ))
        }
        Action::Read(ns) => (Verb::Get, Some(ns)),
        Action::Submit(ns) => (Verb::Submit, Some(ns)),
        Action::Cancel(ns) => (Verb::Cancel, Some(ns)),
        Action::ApplyNamespaced(ns) => (Verb::Apply, Some(ns)),
        Action::FrontDoor(_) => {
            return Err(format!(
                "tenant {}: only an agent acts for its cluster's front door",
                tenant.name
            ))
        }
        Action::Admin(what) | Action::Membership(what) => {
            return Err(format!(
                "tenant {} is not an admin; only admins may {what}",
                tenant.name
            ))
        }
    };
    match namespace {
        Some(ns) if tenant.may(verb, ns) => Ok(()),
        Some(ns) if tenant.has_verb(verb) => Err(format!(
            "tenant {} may not {verb} in namespace {ns:?} (its namespaces: {:?})",
            tenant.name, tenant.namespaces
        )),
        _ => Err(format!("tenant {} lacks the verb {verb}", tenant.name)),
    }
}

/// Who reads the HTTP listener's pages (crate::http): cluster-wide figures
/// are everyone's; workloads are shown per namespace, as the API would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Viewer {
    /// Everything: an admin, any caller without TLS (`--insecure`), or a
    /// caller on a listener bound to loopback (the local dashboard).
    All,
    /// A tenant with a bearer token: its namespaces' workloads.
    Tenant(Tenant),
    /// No credentials: cluster-wide figures only, no workload.
    Anonymous,
}

impl Viewer {
    /// Whether this viewer may see workloads of `namespace`.
    pub fn sees(&self, namespace: &str) -> bool {
        match self {
            Viewer::All => true,
            Viewer::Tenant(t) => t.may(Verb::Get, namespace),
            Viewer::Anonymous => false,
        }
    }
}

/// The authorization a node runs under; cheap to clone.
#[derive(Clone)]
pub struct Authorizer {
    secure: bool,
    policy: Arc<RwLock<Arc<Policy>>>,
    policy_file: Option<PathBuf>,
    metrics: ServerMetrics,
    /// The group's members now (set once the node's Raft exists): a node
    /// certificate of anyone else is refused everywhere.
    members: Arc<RwLock<Option<MembersFn>>>,
    /// Who each client certificate names, parsed once per certificate.
    identities: Arc<IdentityCache>,
}

/// The ids of the Raft group's members as this node knows them.
pub type MembersFn = Arc<dyn Fn() -> Vec<u64> + Send + Sync>;

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("secure", &self.secure)
            .field("policy_file", &self.policy_file)
            .finish()
    }
}

fn read_policy(path: &PathBuf) -> Result<Policy, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read the authorization policy {}: {e}",
            path.display()
        )
    })?;
    Policy::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

impl Authorizer {
    /// No TLS: every caller may do everything.
    pub fn insecure() -> Authorizer {
        Authorizer {
            secure: false,
            policy: Arc::new(RwLock::new(Arc::new(Policy::default()))),
            policy_file: None,
            metrics: ServerMetrics::default(),
            members: Arc::default(),
            identities: Arc::default(),
        }
    }

    /// TLS with the policy in `policy_file` (default: only `admin`).
    pub fn secure(policy_file: Option<PathBuf>) -> Result<Authorizer, String> {
        let policy = match &policy_file {
            Some(p) => read_policy(p)?,
            None => Policy::default(),
        };
        Ok(Authorizer {
            secure: true,
            policy: Arc::new(RwLock::new(Arc::new(policy))),
            policy_file,
            metrics: ServerMetrics::default(),
            members: Arc::default(),
            identities: Arc::default(),
        })
    }

    /// The viewer of an HTTP request with this `Authorization` header, on
    /// a listener that `trusts` its callers (bound to loopback); an
    /// unknown token is an error (the caller meant to be someone).
    pub fn http_viewer(
        &self,
        authorization: Option<&str>,
        cert: Option<&tonic::transport::CertificateDer<'static>>,
        trusts: bool,
    ) -> Result<Viewer, String> {
        if !self.secure || trusts {
            return Ok(Viewer::All);
        }
        let refused = |why: String| {
            self.metrics.refused(reason::UNAUTHENTICATED);
            why
        };
        let policy = self.policy();
        let tenant = match (authorization, cert) {
            (Some(value), _) => {
                let token = value
                    .strip_prefix("Bearer ")
                    .ok_or("Authorization: expected \"Bearer TOKEN\"")?;
                policy
                    .tenant_of_token(token.trim())
                    .cloned()
                    .ok_or_else(|| {
                        refused("the bearer token is not in the authorization policy".into())
                    })?
            }
            // A client certificate (HTTPS, `--http-tls`): the same
            // identities as on the API. Nodes and agents see what anyone
            // sees; their rights are the peer and agent services'.
            (None, Some(leaf)) => match self.identity_of(leaf).map_err(refused)? {
                Identity::Tenant(name) => policy.tenant(&name).cloned().ok_or_else(|| {
                    refused(format!("tenant {name} is not in the authorization policy"))
                })?,
                Identity::Node(_) | Identity::Agent(_) => return Ok(Viewer::Anonymous),
            },
            (None, None) => return Ok(Viewer::Anonymous),
        };
        Ok(if tenant.admin {
            Viewer::All
        } else {
            Viewer::Tenant(tenant)
        })
    }

    /// Where the group's members are read from (the node's Raft metrics).
    pub fn set_members(&self, members: MembersFn) {
        *self.members.write().unwrap_or_else(|p| p.into_inner()) = Some(members);
    }

    /// Whether node `id` may speak as a peer: a member, or anyone while
    /// this node knows no membership yet (a new learner must be reached).
    pub fn is_member(&self, id: u64) -> bool {
        let members = self
            .members
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match members {
            None => true,
            Some(f) => {
                let m = f();
                m.is_empty() || m.contains(&id)
            }
        }
    }

    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// The instruments refusals are counted in; the node serves these
    /// (each `Authorizer` constructor makes a fresh set, so build one per
    /// node).
    pub fn metrics(&self) -> &ServerMetrics {
        &self.metrics
    }

    /// Logs and counts a connection that failed its TLS handshake.
    pub fn handshake_refused(&self, refused: fleetq_proto::tls::HandshakeRefused) {
        let peer = refused
            .peer
            .map(|p| p.to_string())
            .unwrap_or_else(|| "unknown".into());
        tracing::warn!(client = %peer, reason = reason::TLS_HANDSHAKE, "refused: TLS handshake failed: {}", refused.error);
        self.metrics.refused(reason::TLS_HANDSHAKE);
    }

    fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Rereads the policy file every `every`; a changed file that does not
    /// parse is logged and the previous policy stays in force.
    pub fn spawn_reloader(&self, every: Duration) {
        let Some(path) = self.policy_file.clone() else {
            return;
        };
        let slot = Arc::downgrade(&self.policy);
        tokio::spawn(async move {
            let mut last_error = None;
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(slot) = slot.upgrade() else { return };
                match read_policy(&path) {
                    Ok(policy) => {
                        last_error = None;
                        let mut current = slot.write().unwrap_or_else(|p| p.into_inner());
                        if **current != policy {
                            *current = Arc::new(policy);
                            tracing::info!(file = %path.display(), "authorization policy reloaded");
                        }
                    }
                    Err(e) if last_error.as_ref() != Some(&e) => {
                        tracing::error!(error = %e, "authorization policy not reloaded; the previous one stays in force");
                        last_error = Some(e);
                    }
                    Err(_) => {}
                }
            }
        });
    }

    /// Who a client certificate names ([`Identity::of_certificate`], read
    /// once per certificate rather than once per request).
    pub fn identity_of(
        &self,
        cert: &tonic::transport::CertificateDer<'static>,
    ) -> Result<Identity, String> {
        self.identities.identity(cert)
    }

    /// Logs and counts a refusal; returns the status to answer with.
    pub fn refuse<T>(
        &self,
        request: &Request<T>,
        rpc: &str,
        why: &'static str,
        status: Status,
    ) -> Status {
        tracing::warn!(rpc, client = %client_key(request), reason = why, "refused: {}", status.message());
        self.metrics.refused(why);
        status
    }

    /// Who sent `request`: its bearer token's tenant, else its client
    /// certificate's identity.
    fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        let certs = request.peer_certs();
        self.caller_of(
            request
                .metadata()
                .get("authorization")
                .map(|v| v.as_bytes()),
            certs.as_ref().map(|c| c.as_slice()),
        )
    }

    /// [`Self::caller`] from what arrives before the body: the
    /// `authorization` header and the connection's client certificates.
    /// The service door (`gate`) and the handlers both ask this.
    pub(crate) fn caller_of(
        &self,
        authorization: Option<&[u8]>,
        certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<Caller, Status> {
        if !self.secure {
            return Ok(Caller::Insecure);
        }
        let policy = self.policy();
        if let Some(value) = authorization {
            let token = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .ok_or_else(|| {
                    Status::unauthenticated("authorization: expected \"Bearer TOKEN\"")
                })?;
            return policy
                .tenant_of_token(token.trim())
                .map(|t| Caller::Tenant(t.clone()))
                .ok_or_else(|| {
                    Status::unauthenticated("the bearer token is not in the authorization policy")
                });
        }
        let certs = certs.ok_or_else(|| {
            Status::unauthenticated(
                "no client certificate and no bearer token (see `fleetq certs`)",
            )
        })?;
        let leaf = certs
            .first()
            .ok_or_else(|| Status::unauthenticated("an empty client certificate chain"))?;
        let identity = self.identity_of(leaf).map_err(Status::unauthenticated)?;
        Ok(match identity {
            Identity::Node(id) if !self.is_member(id) => {
                return Err(Status::permission_denied(format!(
                    "node {id} is not a member of this group"
                )))
            }
            Identity::Node(id) => Caller::Node(id),
            Identity::Agent(c) => Caller::Agent(c),
            Identity::Tenant(name) => match policy.tenant(&name) {
                Some(t) => Caller::Tenant(t.clone()),
                None => {
                    return Err(Status::permission_denied(format!(
                        "tenant {name} is not in the authorization policy"
                    )))
                }
            },
        })
    }

    /// The caller of `request`, or the refusal, logged and counted:
    /// `unauthenticated` without a known identity, `forbidden` for a
    /// tenant the policy lacks.
    pub fn identify<T>(&self, request: &Request<T>, rpc: &str) -> Result<Caller, Status> {
        self.caller(request).map_err(|status| {
            let why = if status.code() == tonic::Code::Unauthenticated {
                reason::UNAUTHENTICATED
            } else {
                reason::FORBIDDEN
            };
            self.refuse(request, rpc, why, status)
        })
    }

    /// The caller of a client API request, if it may do `action`;
    /// otherwise the refusal, logged and counted.
    pub fn api<T>(
        &self,
        request: &Request<T>,
        rpc: &str,
        action: Action<'_>,
    ) -> Result<Caller, Status> {
        let caller = self.identify(request, rpc)?;
        self.allow(request, rpc, &caller, action)?;
        Ok(caller)
    }

    /// Checks one more action for a caller already known.
    pub fn allow<T>(
        &self,
        request: &Request<T>,
        rpc: &str,
        caller: &Caller,
        action: Action<'_>,
    ) -> Result<(), Status> {
        permits(caller, action).map_err(|why| {
            self.refuse(
                request,
                rpc,
                reason::FORBIDDEN,
                Status::permission_denied(format!("{caller}: {why}")),
            )
        })
    }

    /// The cluster an Agent service request may speak for: `Some(cluster)`
    /// for an agent's certificate, `None` (any) when insecure; anyone else
    /// is refused.
    pub fn agent<T>(&self, request: &Request<T>, rpc: &str) -> Result<Option<String>, Status> {
        match self.identify(request, rpc)? {
            Caller::Insecure => Ok(None),
            Caller::Agent(c) => Ok(Some(c)),
            other => Err(self.refuse(
                request,
                rpc,
                reason::FORBIDDEN,
                Status::permission_denied(format!(
                    "{other}: only agents may use the Agent service"
                )),
            )),
        }
    }

    /// Refuses an agent speaking for a cluster its certificate does not
    /// name (logged and counted as `foreign_cluster`).
    pub fn agent_cluster(
        &self,
        allowed: &Option<String>,
        cluster: &str,
        client: &str,
        rpc: &str,
    ) -> Result<(), Status> {
        match allowed {
            Some(own) if own != cluster => {
                let message =
                    format!("the agent of cluster {own} may not speak for cluster {cluster:?}");
                tracing::warn!(
                    rpc,
                    client,
                    reason = reason::FOREIGN_CLUSTER,
                    "refused: {message}"
                );
                self.metrics.refused(reason::FOREIGN_CLUSTER);
                Err(Status::permission_denied(message))
            }
            _ => Ok(()),
        }
    }

    /// Lets a Raft service request through only from a node named in
    /// `members` (any node while `members` is empty: this node has not
    /// joined yet).
    pub fn peer<T>(
        &self,
        request: &Request<T>,
        rpc: &str,
        members: &[u64],
    ) -> Result<Option<u64>, Status> {
        match self.identify(request, rpc)? {
            Caller::Insecure => Ok(None),
            Caller::Node(id) if members.is_empty() || members.contains(&id) => Ok(Some(id)),
            Caller::Node(id) => Err(self.refuse(
                request,
                rpc,
                reason::FORBIDDEN,
                Status::permission_denied(format!("node {id} is not a member of this group")),
            )),
            other => Err(self.refuse(
                request,
                rpc,
                reason::FORBIDDEN,
                Status::permission_denied(format!(
                    "{other}: only member nodes may use the Raft service"
                )),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str, admin: bool, namespaces: &[&str], verbs: &[Verb]) -> Caller {
        Caller::Tenant(Tenant {
            name: name.into(),
            admin,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            verbs: verbs.to_vec(),
            tokens: Vec::new(),
        })
    }

    #[test]
    fn tenants_stay_in_their_namespaces_and_verbs() {
        let a = tenant("team-a", false, &["team-a"], &[Verb::Submit, Verb::Get]);
        assert!(permits(&a, Action::Submit("team-a")).is_ok());
        assert!(permits(&a, Action::Read("team-a")).is_ok());
        assert!(permits(&a, Action::ReadCluster).is_ok());
        let e = permits(&a, Action::Submit("team-b")).expect_err("foreign namespace");
        assert!(e.contains("namespace \"team-b\""), "{e}");
        let e = permits(&a, Action::Cancel("team-a")).expect_err("no cancel verb");
        assert!(e.contains("lacks the verb cancel"), "{e}");
        let e = permits(&a, Action::Admin("apply a ClusterQueue")).expect_err("not admin");
        assert!(e.contains("only admins may apply a ClusterQueue"), "{e}");
        assert!(permits(&a, Action::ReadAllNamespaces).is_err());
        assert!(permits(&a, Action::ApplyNamespaced("team-a")).is_err());
    }

    #[test]
    fn nodes_may_only_relay_membership_changes() {
        let node = Caller::Node(1);
        assert!(permits(&node, Action::Membership("add a learner")).is_ok());
        for action in [
            Action::Admin("apply a ResourceFlavor"),
            Action::ReadCluster,
            Action::Submit("default"),
            Action::WriteAny,
        ] {
            let err = permits(&node, action).unwrap_err();
            assert!(err.contains("peer rights only"), "{err}");
        }
        let reader = tenant("readers", false, &["*"], &[Verb::Get]);
        assert!(permits(&reader, Action::Membership("add a learner")).is_err());
    }

    #[test]
    fn admins_and_insecure_may_everything_agents_nothing() {
        let admin = tenant("platform", true, &[], &[]);
        for caller in [admin, Caller::Insecure] {
            assert!(permits(&caller, Action::Admin("x")).is_ok());
            assert!(permits(&caller, Action::Submit("any")).is_ok());
        }
        let agent = Caller::Agent("east".into());
        assert!(permits(&agent, Action::ReadCluster).is_err());
        assert!(permits(&agent, Action::Submit("default")).is_err());
    }

    #[test]
    fn a_reader_may_write_nothing_so_its_manifests_are_not_parsed() {
        let reader = tenant("readers", false, &["*"], &[Verb::Get]);
        let err = permits(&reader, Action::WriteAny).unwrap_err();
        assert!(err.contains("neither apply nor submit"), "{err}");
        let submitter = tenant("team-a", false, &["team-a"], &[Verb::Submit]);
        assert!(permits(&submitter, Action::WriteAny).is_ok());
    }

    #[test]
    fn star_reads_every_namespace() {
        let r = tenant("readers", false, &["*"], &[Verb::Get]);
        assert!(permits(&r, Action::ReadAllNamespaces).is_ok());
        assert!(permits(&r, Action::Read("x")).is_ok());
        assert!(permits(&r, Action::Submit("x")).is_err());
    }
}
